import { EventEmitter } from "node:events";
import type { Context } from "koa";
import { describe, expect, it } from "vitest";
import type { DeltaMessage } from "../../../../contracts/deltaMessage.ts";
import type { RunningJob } from "../../jobs/runningJob.ts";
import { relayStream } from "../../streaming/relayStream.ts";
import { SseResponse } from "../../streaming/sseResponse.ts";
import { chatStreamFormat } from "./chatFormat.ts";

/** A Koa context whose response collects what is written. */
function fakeContext(): { ctx: Context; written: () => string } {
  const chunks: string[] = [];
  const res = Object.assign(new EventEmitter(), {
    statusCode: 0,
    writableFinished: false,
    setHeader: () => undefined,
    write: (text: string) => chunks.push(text) > 0,
    end: (text: string) => {
      chunks.push(text);
      res.writableFinished = true;
    },
  });
  const ctx = { res, response: { headers: {} }, respond: true } as unknown as Context;
  return { ctx, written: () => chunks.join("") };
}

function jobOf(messages: DeltaMessage[]): RunningJob {
  const queue = [...messages];
  return { completionId: "chatcmpl-1", next: async () => queue.shift()!, release: () => undefined };
}

const head = { id: "chatcmpl-1", created: 1_764_160_000, model: "tiny-chat", reasoning: false, includeUsage: true };
const usage = { promptTokens: 3, completionTokens: 4, reasoningTokens: 0 };
const messages: DeltaMessage[] = [
  { seq: 1, type: "delta", delta: { content: "Hi" }, tokens: 1 },
  { seq: 2, type: "delta", delta: { content: "" }, tokens: 1 },
  { seq: 3, type: "delta", delta: { content: ' "there"\u0000\ud800' }, tokens: 1 },
  { seq: 4, type: "delta", delta: { toolCalls: [{ index: 0, id: "call_1", type: "function", function: { name: "f", arguments: "{}" } }] } },
  { seq: 5, type: "finish", finishReason: "stop" },
  { seq: 6, type: "usage", usage },
];

async function relayed(from: DeltaMessage[], resumed?: { firstSent: boolean }): Promise<string> {
  const { ctx, written } = fakeContext();
  const sse = new SseResponse(ctx, () => undefined, { keepAliveMs: 60_000 });
  await relayStream(jobOf(from), sse, chatStreamFormat(head), true, resumed);
  return written();
}

/**
 * The events as the relay wrote them before it wrote chunk text: JSON.stringify of each chunk object,
 * after the reconnect delay that opens every stream.
 */
function expected(from: DeltaMessage[], first: boolean): string {
  const format = chatStreamFormat(head);
  let out = "retry: 2000\n\n";
  for (const message of from) {
    if (message.type === "delta") {
      const chunk = format.deltaChunk(message.delta, first);
      if (chunk === null) continue;
      out += `id: ${message.seq}\ndata: ${JSON.stringify(chunk)}\n\n`;
      first = false;
    } else if (message.type === "finish") {
      out += `id: ${message.seq}\ndata: ${JSON.stringify(format.finish(message.finishReason, first))}\n\n`;
    } else if (message.type === "usage") {
      out += `id: ${message.seq}\ndata: ${JSON.stringify(format.usage(message.usage))}\n\n`;
    }
  }
  return `${out}data: [DONE]\n\n`;
}

describe("a chat stream as relayStream writes it", () => {
  it("writes each chunk's JSON text as the chunk object's JSON: the role on the first only, an empty delta skipped", async () => {
    const text = await relayed(messages);
    expect(text).toBe(expected(messages, true));
    expect(text.match(/"role":"assistant"/g)).toHaveLength(1);
    expect(text).not.toContain("id: 2\n");
  });

  it("goes on as the original in a resumed stream (no second role) and from its start when resumed before the first chunk", async () => {
    const rest = messages.slice(2);
    expect(await relayed(rest, { firstSent: true })).toBe(expected(rest, false));
    expect(await relayed(messages, { firstSent: false })).toBe(await relayed(messages));
    const original = await relayed(messages);
    // The resumed stream's events are the original's last ones (each stream opens with its own `retry:`).
    expect(original.endsWith((await relayed(rest, { firstSent: true })).slice("retry: 2000\n\n".length))).toBe(true);
  });
});
