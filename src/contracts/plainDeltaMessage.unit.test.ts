import { describe, expect, it } from "vitest";
import { DeltaMessageSchema } from "./deltaMessage.ts";
import { plainDeltaMessage } from "./plainDeltaMessage.ts";

/** Values put into every field plainDeltaMessage looks at, valid and invalid for the schema. */
const probes: unknown[] = [undefined, null, "x", "", 0, 1.5, -1, 2 ** 60, true, {}, [], [{}], { content: "x" }, "delta", "usage"];
const messageFields = ["seq", "type", "delta", "tokens", "usage", "extra", "__proto__"];
const deltaFields = ["content", "reasoning", "toolCalls", "logprobs", "role", "__proto__"];

function variants(): unknown[] {
  const out: unknown[] = [null, [], "x", 3, {}, { seq: 1, type: "delta" }, { seq: 1, type: "delta", delta: {} }];
  for (const probe of probes) {
    for (const field of messageFields) out.push(JSON.parse(JSON.stringify({ seq: 1, type: "delta", delta: { content: "a" }, [field]: probe }) ?? "null"));
    for (const field of deltaFields) out.push(JSON.parse(JSON.stringify({ seq: 1, type: "delta", delta: { content: "a", [field]: probe } })));
    out.push({ seq: 1, type: "delta", delta: probe });
  }
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

  it("leaves other messages, tool calls and logprobs to the schema", () => {
    expect(plainDeltaMessage({ seq: 0, type: "started" })).toBeNull();
    expect(plainDeltaMessage({ seq: 1, type: "delta", delta: { toolCalls: [{ index: 0 }] } })).toBeNull();
    expect(plainDeltaMessage({ seq: 1, type: "delta", delta: { content: "a", logprobs: [] } })).toBeNull();
    expect(plainDeltaMessage({ seq: 2, type: "usage", usage: { promptTokens: 1, completionTokens: 1, reasoningTokens: 0 } })).toBeNull();
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
    expect(accepted).toBeGreaterThan(5);
  });
});
