import { describe, expect, it } from "vitest";
import { DeltaMessageSchema } from "./deltaMessage.ts";
import { plainDeltaMessage } from "./plainDeltaMessage.ts";

/** Values put into every field plainDeltaMessage looks at, valid and invalid for the schema. */
const probes: unknown[] = [undefined, null, "x", "", 0, 1.5, -1, 2 ** 60, true, {}, [], [{}], { content: "x" }, "delta", "usage"];
const messageFields = ["seq", "type", "delta", "tokens", "usage", "extra", "__proto__"];
const deltaFields = ["content", "reasoning", "toolCalls", "logprobs", "role", "__proto__"];

const toolCall = { index: 0, id: "call_1", type: "function", function: { name: "f", arguments: '{"a":1}' } };
const toolCallFields = ["index", "id", "type", "function", "extra", "__proto__"];
const functionFields = ["name", "arguments", "extra"];
const logprob = { token: " a", logprob: -0.5, bytes: [32, 97], top_logprobs: [{ token: " b", logprob: -1, bytes: [32, 98] }] };
const logprobFields = ["token", "logprob", "bytes", "top_logprobs", "extra", "__proto__"];
const topLogprobFields = ["token", "logprob", "bytes", "top_logprobs", "extra"];

/** A message through JSON, as the API receives it (a field set to undefined is absent). */
const wire = (value: unknown): unknown => JSON.parse(JSON.stringify(value) ?? "null");
const delta = (fields: Record<string, unknown>) => wire({ seq: 1, type: "delta", delta: fields });

function variants(): unknown[] {
  const out: unknown[] = [null, [], "x", 3, {}, { seq: 1, type: "delta" }, { seq: 1, type: "delta", delta: {} }];
  out.push(
    delta({ toolCalls: [toolCall] }),
    delta({ toolCalls: [] }),
    delta({ logprobs: [logprob] }),
    delta({ content: "a", toolCalls: [{ index: 2 }], logprobs: [] }),
  );
  for (const probe of probes) {
    for (const field of messageFields) out.push(wire({ seq: 1, type: "delta", delta: { content: "a" }, [field]: probe }));
    for (const field of deltaFields) out.push(delta({ content: "a", [field]: probe }));
    for (const field of toolCallFields) out.push(delta({ toolCalls: [{ ...toolCall, [field]: probe }] }));
    for (const field of functionFields) out.push(delta({ toolCalls: [{ ...toolCall, function: { ...toolCall.function, [field]: probe } }] }));
    for (const field of logprobFields) out.push(delta({ logprobs: [{ ...logprob, [field]: probe }] }));
    for (const field of topLogprobFields) out.push(delta({ logprobs: [{ ...logprob, top_logprobs: [{ ...logprob.top_logprobs[0], [field]: probe }] }] }));
    out.push(delta({ logprobs: [{ ...logprob, bytes: [1, probe] }] }), delta({ toolCalls: [toolCall, probe] }), delta({ logprobs: [probe] }));
    out.push({ seq: 1, type: "delta", delta: probe });
  }
  out.push(JSON.parse('{"seq":1,"type":"delta","delta":{"toolCalls":[{"index":0,"__proto__":{"id":"x"}}]}}'));
  out.push(JSON.parse('{"seq":1,"type":"delta","delta":{"content":"a"},"__proto__":{"x":1}}'));
  out.push(JSON.parse('{"seq":1,"type":"delta","delta":{"__proto__":{"content":"a"}}}'));
  return out;
}

describe("plainDeltaMessage", () => {
  it("takes text deltas as they are", () => {
    for (const message of [
      { seq: 3, type: "delta", delta: { content: " the" } },
      { type: "delta", delta: { reasoning: "hmm", content: "" }, seq: 0 },
      { seq: 9, type: "delta", delta: {} },
      { seq: 4, type: "delta", delta: { content: " the" }, tokens: 2 },
    ]) {
      expect(plainDeltaMessage(message)).toBe(message);
    }
  });

  it("takes tool-call pieces and logprobs as they are too", () => {
    for (const message of [delta({ toolCalls: [toolCall, { index: 1, function: { arguments: "}" } }] }), delta({ content: " a", logprobs: [logprob] })]) {
      expect(plainDeltaMessage(message)).toBe(message);
    }
  });

  it("leaves other messages and anything the schema would strip or refuse to the schema", () => {
    expect(plainDeltaMessage({ seq: 0, type: "started" })).toBeNull();
    expect(plainDeltaMessage({ seq: 2, type: "usage", usage: { promptTokens: 1, completionTokens: 1, reasoningTokens: 0 } })).toBeNull();
    expect(plainDeltaMessage(delta({ toolCalls: [{ ...toolCall, extra: 1 }] }))).toBeNull();
    expect(plainDeltaMessage(delta({ toolCalls: [{ index: 0.5 }] }))).toBeNull();
    expect(plainDeltaMessage(delta({ logprobs: [{ ...logprob, top_logprobs: [{ ...logprob.top_logprobs[0], top_logprobs: [] }] }] }))).toBeNull();
  });

  it("never accepts a message the schema rejects, and returns what the schema would", () => {
    let accepted = 0;
    for (const json of variants()) {
      const plain = plainDeltaMessage(json);
      if (plain === null) continue;
      accepted++;
      const parsed = DeltaMessageSchema.safeParse(json);
      expect(parsed.success, JSON.stringify(json)).toBe(true);
      expect(plain, JSON.stringify(json)).toEqual(parsed.data);
    }
    expect(accepted).toBeGreaterThan(30);
  });
});
