import { describe, expect, it } from "vitest";
import type { EngineDeltaMessage } from "../../../../contracts/deltaMessage.ts";
import { completionStreamFormat } from "./completionFormat.ts";

/** Texts that JSON escapes in every way: quotes, backslashes, control characters, NUL, lone surrogates, non-BMP, separators. */
const texts = ["", " the", '"quoted"', "back\\slash", "\n\t\r\b\f", "\u0000", "\u001f\u007f", "\ud800", "x\udc00y", "\ud83d\ude00", "é 中文", "\u2028\u2029"];

function deltas(): EngineDeltaMessage[] {
  const out: EngineDeltaMessage[] = [{}, { reasoning: "think" }, { toolCalls: [{ index: 0, function: { arguments: "{}" } }] }];
  for (const content of texts) out.push({ content }, { content, reasoning: "\ud800" });
  return out;
}

describe("text_completion chunk text (the relay's per-token path)", () => {
  it("is JSON.stringify of the chunk object for every delta, first or not, with or without include_usage", () => {
    let sent = 0;
    for (const head of [
      { id: "cmpl-ABCDEFGHIJKLMNOPQRSTUVWX", created: 1_764_160_000, model: "tiny-chat" },
      { id: "cmpl-x", created: 0, model: 'org/model:"q"\u00e9\ud800' },
    ]) {
      for (const includeUsage of [false, true]) {
        const format = completionStreamFormat({ ...head, includeUsage });
        for (const delta of deltas()) {
          for (const first of [true, false]) {
            const chunk = format.deltaChunk(delta, first);
            expect(format.deltaJson(delta, first), `${head.model} ${includeUsage} ${JSON.stringify(delta)}`).toBe(
              chunk === null ? null : JSON.stringify(chunk),
            );
            if (chunk !== null) sent++;
          }
        }
      }
    }
    expect(sent).toBeGreaterThan(80);
  });

  it("is the OpenAI chunk: the text, no role, nothing for a delta without text", () => {
    const format = completionStreamFormat({ id: "cmpl-1", created: 5, model: "m", includeUsage: false });
    expect(JSON.parse(format.deltaJson({ content: " the" }, true)!)).toEqual({
      id: "cmpl-1",
      object: "text_completion",
      created: 5,
      model: "m",
      choices: [{ text: " the", index: 0, logprobs: null, finish_reason: null }],
    });
    expect(format.deltaJson({ reasoning: "hmm" }, true)).toBeNull();
    expect(format.deltaJson({ content: "" }, false)).toBeNull();
  });
});
