import { describe, expect, it } from "vitest";
import { plainChatChunk } from "./plainChatChunk.ts";
import { ChatChunkSchema } from "./upstreamWire.ts";

const base = { id: "c", object: "chat.completion.chunk", created: 1, model: "m" };
const choice = (fields: Record<string, unknown>) => ({ ...base, choices: [{ index: 0, finish_reason: null, ...fields }] });

/** Values put into every field plainChatChunk looks at, valid and invalid for the schema. */
const probes: unknown[] = [undefined, null, "x", "", 0, 1.5, -1, 2 ** 60, true, {}, [], [{}], { content: "x" }];
const fields = ["object", "message", "error", "usage", "choices"];
const choiceFields = ["index", "finish_reason", "logprobs", "delta"];
const deltaFields = ["content", "reasoning_content", "reasoning", "tool_calls", "role"];

function variants(): unknown[] {
  const out: unknown[] = [null, [], "x", 3, base, choice({ delta: { content: "hi" } })];
  for (const probe of probes) {
    for (const field of fields) out.push({ ...base, [field]: probe });
    for (const field of choiceFields) out.push(choice({ delta: { content: "a" }, [field]: probe }));
    for (const field of deltaFields) out.push(choice({ delta: { content: "a", [field]: probe } }));
    out.push({ ...base, choices: [probe] });
    out.push({ ...base, choices: [choice({ delta: {} }).choices[0], probe] });
  }
  return out;
}

describe("plainChatChunk", () => {
  it("takes the common delta chunks as they are", () => {
    for (const chunk of [
      choice({ delta: { role: "assistant", content: "" } }),
      choice({ delta: { content: " the" }, logprobs: null }),
      choice({ delta: { reasoning_content: "hmm", content: null } }),
      choice({ delta: {}, finish_reason: "stop" }),
      { ...base, choices: [], usage: null },
    ]) {
      expect(plainChatChunk(chunk)).toBe(chunk);
    }
  });

  it("leaves tool calls, logprobs, usage and errors to the schema", () => {
    expect(plainChatChunk(choice({ delta: { tool_calls: [{ index: 0 }] } }))).toBeNull();
    expect(plainChatChunk(choice({ delta: { content: "a" }, logprobs: { content: [] } }))).toBeNull();
    expect(plainChatChunk({ ...base, choices: [], usage: { prompt_tokens: 1, completion_tokens: 1 } })).toBeNull();
    expect(plainChatChunk({ error: { message: "boom" } })).toBeNull();
  });

  it("never accepts a chunk the schema rejects, and reads the same fields from what it accepts", () => {
    let accepted = 0;
    for (const json of variants()) {
      const plain = plainChatChunk(json);
      if (plain === null) continue;
      accepted++;
      const parsed = ChatChunkSchema.safeParse(json);
      expect(parsed.success, JSON.stringify(json)).toBe(true);
      const read = (c: typeof plain) => ({
        object: c.object,
        error: c.error,
        usage: c.usage,
        choices: c.choices?.map((x) => [
          x.index,
          x.finish_reason,
          x.logprobs,
          x.delta?.content,
          x.delta?.reasoning_content,
          x.delta?.reasoning,
          x.delta?.tool_calls,
        ]),
      });
      expect(read(plain)).toEqual(read(parsed.data!));
    }
    expect(accepted).toBeGreaterThan(20);
  });
});
