import { describe, expect, it } from "vitest";
import type { EngineDeltaMessage } from "../../../../contracts/deltaMessage.ts";
import type { StreamFormat } from "../../streaming/streamFormat.ts";
import { chatStreamFormat } from "./chatFormat.ts";

/** Texts that JSON escapes in every way: quotes, backslashes, control characters, NUL, lone surrogates, non-BMP, separators. */
const texts = [
  "",
  " the",
  "Hello, world",
  '"quoted"',
  "back\\slash",
  "\n\t\r\b\f",
  "\u0000",
  "\u001f\u007f",
  "\ud800",
  "x\udc00y",
  "\ud83d\ude00",
  "é ü 中文",
  "\u2028\u2029",
  "</script>",
];

const toolCalls: NonNullable<EngineDeltaMessage["toolCalls"]>[] = [
  [],
  [{ index: 0, id: "call_1", type: "function", function: { name: "get_weather", arguments: "" } }],
  [{ index: 0, function: { arguments: '{"city":"Z\\u00fcrich\u0000"}' } }],
  [{ index: 1 }, { index: 2, function: { name: "x\ud800" } }],
];

const logprobs: NonNullable<EngineDeltaMessage["logprobs"]>[] = [
  [],
  [{ token: " the", logprob: -0.25, bytes: [32, 116, 104, 101], top_logprobs: [{ token: " a", logprob: -1.5e-7, bytes: [32, 97] }] }],
  [{ token: "\ud800", logprob: 0, bytes: [], top_logprobs: [] }],
];

/** Every combination of content, reasoning, tool calls and logprobs a delta can hold (absent or present). */
function deltas(): EngineDeltaMessage[] {
  const out: EngineDeltaMessage[] = [{}];
  for (const content of [undefined, ...texts]) {
    for (const reasoning of [undefined, "", "think \u0000\ud800", "\n"]) {
      const delta: EngineDeltaMessage = {};
      if (content !== undefined) delta.content = content;
      if (reasoning !== undefined) delta.reasoning = reasoning;
      out.push(delta);
    }
  }
  for (const calls of toolCalls) for (const content of [undefined, "", "a"]) out.push({ ...(content !== undefined ? { content } : {}), toolCalls: calls });
  for (const lp of logprobs) for (const content of [undefined, "", " the", "\ud800"]) out.push({ ...(content !== undefined ? { content } : {}), logprobs: lp });
  out.push({ content: "a", reasoning: "b", toolCalls: toolCalls[1]!, logprobs: logprobs[1]! });
  return out;
}

const heads = [
  { id: "chatcmpl-ABCDEFGHIJKLMNOPQRSTUVWX", created: 1_764_160_000, model: "tiny-chat", reasoning: false },
  { id: "cmpl-x", created: 0, model: 'org/model:"q"\u00e9\ud800', reasoning: true },
];

function formats(): [string, StreamFormat][] {
  const out: [string, StreamFormat][] = [];
  for (const head of heads) {
    for (const includeUsage of [false, true]) {
      out.push([`${head.model} include_usage=${includeUsage}`, chatStreamFormat({ ...head, includeUsage })]);
    }
  }
  return out;
}

describe("chat.completion.chunk text (the relay's per-token path)", () => {
  it("is JSON.stringify of the chunk object for every delta, first or not, with or without include_usage", () => {
    let compared = 0;
    let sent = 0;
    for (const [name, format] of formats()) {
      for (const delta of deltas()) {
        for (const first of [true, false]) {
          const chunk = format.deltaChunk(delta, first);
          const text = format.deltaJson(delta, first);
          expect(text, `${name} first=${first} ${JSON.stringify(delta)}`).toBe(chunk === null ? null : JSON.stringify(chunk));
          compared++;
          if (text !== null) sent++;
        }
      }
    }
    expect(compared).toBeGreaterThan(400);
    expect(sent).toBeGreaterThan(300);
  });

  it("is the OpenAI chunk: the role on the first chunk, nothing for an empty delta, usage null with include_usage", () => {
    const chat = chatStreamFormat({ ...heads[0]!, includeUsage: true });
    expect(JSON.parse(chat.deltaJson({ content: "Hi" }, true)!)).toEqual({
      id: heads[0]!.id,
      object: "chat.completion.chunk",
      created: heads[0]!.created,
      model: heads[0]!.model,
      choices: [{ index: 0, delta: { role: "assistant", content: "Hi" }, logprobs: null, finish_reason: null }],
      usage: null,
    });
    expect(JSON.parse(chat.deltaJson({ reasoning: "hmm" }, true)!).choices[0].delta).toEqual({ role: "assistant", reasoning_content: "hmm", content: "" });
    expect(JSON.parse(chat.deltaJson({ content: " the" }, false)!).choices[0].delta).toEqual({ content: " the" });
    expect(chat.deltaJson({ content: "" }, false)).toBeNull();
    expect(chat.deltaJson({}, false)).toBeNull();
  });
});
