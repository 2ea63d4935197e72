import { EventEmitter } from "node:events";
import type { Context } from "koa";
import { parseArgs } from "node:util";
import type { DeltaMessage } from "../src/contracts/deltaMessage.ts";
import { decodeReplyBatch, encodeReplyBatch, encodeReplyEntry } from "../src/contracts/replyBatch.ts";
import { chatStreamFormat } from "../src/api/inference/endpoints/chat/chatFormat.ts";
import { SseResponse } from "../src/api/inference/streaming/sseResponse.ts";
import type { StreamFormat } from "../src/api/inference/streaming/streamFormat.ts";

/**
 * The per-message work of a streamed chat completion, without Redis and sockets: `--messages` text
 * delta messages (default 100,000) in reply batches of `--batch` entries (default 8, as a worker's
 * PUBLISH carries them), encoded as the worker does and decoded and relayed as the API does, into an
 * SseResponse whose socket only counts bytes. CPU ms per path (median of `--rounds`, after a warm-up):
 *
 * - api, chunk object: decodeReplyBatch, the chunk as an object, JSON.stringify of it (the relay until issue 32);
 * - api, chunk text: decodeReplyBatch, the chunk's JSON text built as text (StreamFormat.deltaJson, the relay now);
 * - api, worker-built chunk: the first design, emulated: each message carries the chunk's JSON
 *   text (`chunk`), the API parses the batch and writes it as it is;
 * - worker, message: JSON.stringify of the delta message (what DeltaPublisher writes);
 * - worker, message + chunk: the chunk text built and carried in the message instead of the delta.
 *
 * `node bench/relayMessages.ts [--messages 100000] [--batch 8] [--rounds 7]`
 */
const { values } = parseArgs({
  options: { messages: { type: "string", default: "100000" }, batch: { type: "string", default: "8" }, rounds: { type: "string", default: "7" } },
});
const count = Number(values.messages);
const perBatch = Number(values.batch);
const rounds = Number(values.rounds);

const words = [" the", " quick", " brown", " fox", " jumps", " über", ' "quoted"', " naïve", "\n", " 42", " lazy", " dog.", " 🙂"];
const head = { id: "chatcmpl-ABCDEFGHIJKLMNOPQRSTUVWX", created: 1_764_160_000, model: "stand-in-model", reasoning: false, includeUsage: false };
const ids = Array.from({ length: perBatch }, (_, i) => `chatcmpl-ABCDEFGHIJKLMNOPQRSTU${String(i).padStart(3, "0")}`);
const format = chatStreamFormat(head);

/** The delta messages as the worker writes them (seq from 2: seq 1 is a stream's first chunk, with the role). */
function message(i: number): DeltaMessage {
  return { seq: 2 + i, type: "delta", delta: { content: words[i % words.length]! }, tokens: 1 };
}

function batches(encode: (message: DeltaMessage) => string): string[] {
  const out: string[] = [];
  for (let i = 0; i < count; i += perBatch) {
    const entries: string[] = [];
    for (let j = 0; j < perBatch && i + j < count; j++) entries.push(encodeReplyEntry(ids[j]!, encode(message(i + j))));
    out.push(encodeReplyBatch(entries));
  }
  return out;
}

/** The emulated worker-built chunk: the delta message with its chunk text instead of its delta. */
const withChunk = (m: DeltaMessage) =>
  JSON.stringify(m.type === "delta" ? { seq: m.seq, type: m.type, chunk: format.deltaJson(m.delta, false), tokens: m.tokens } : m);

/** An SseResponse on a socket that counts what is written. */
function countingSse(): { sse: SseResponse; bytes: () => number } {
  let bytes = 0;
  const res = Object.assign(new EventEmitter(), {
    statusCode: 0,
    writableFinished: false,
    setHeader: () => undefined,
    write: (text: string) => {
      bytes += text.length;
      return true;
    },
    end: () => undefined,
  });
  const ctx = { res, response: { headers: {} }, respond: true } as unknown as Context;
  return { sse: new SseResponse(ctx, () => undefined, { keepAliveMs: 3_600_000 }), bytes: () => bytes };
}

function relayObjects(payloads: string[], sse: SseResponse, streamFormat: StreamFormat): void {
  for (const payload of payloads) {
    for (const { message } of decodeReplyBatch(payload)) {
      if (message.type !== "delta") continue;
      const chunk = streamFormat.deltaChunk(message.delta, false);
      if (chunk !== null) sse.event(message.seq, chunk);
    }
  }
}

function relayText(payloads: string[], sse: SseResponse, streamFormat: StreamFormat): void {
  for (const payload of payloads) {
    for (const { message } of decodeReplyBatch(payload)) {
      if (message.type !== "delta") continue;
      const chunk = streamFormat.deltaJson(message.delta, false);
      if (chunk !== null) sse.eventJson(message.seq, chunk);
    }
  }
}

/** The worker-built chunk: the pairs parsed and each message's shape checked by hand, its chunk text written as it is. */
function relayWorkerChunks(payloads: string[], sse: SseResponse): void {
  for (const payload of payloads) {
    const pairs = JSON.parse(payload) as unknown[];
    for (const pair of pairs) {
      if (!Array.isArray(pair) || typeof pair[0] !== "string") continue;
      const m = pair[1] as Record<string, unknown> | null;
      if (typeof m !== "object" || m === null || m.type !== "delta" || !Number.isSafeInteger(m.seq) || typeof m.chunk !== "string") continue;
      sse.eventJson(m.seq as number, m.chunk);
    }
  }
}

function cpuMs(run: () => void): number {
  const start = process.cpuUsage();
  run();
  const used = process.cpuUsage(start);
  return (used.user + used.system) / 1000;
}

const plain = batches((m) => JSON.stringify(m));
const chunked = batches(withChunk);
const { sse } = countingSse();
const paths: [string, () => void][] = [
  ["api, chunk object (before)", () => relayObjects(plain, sse, format)],
  ["api, chunk text (now)", () => relayText(plain, sse, format)],
  ["api, worker-built chunk (emulated)", () => relayWorkerChunks(chunked, sse)],
  ["worker, message (now)", () => batches((m) => JSON.stringify(m))],
  ["worker, message + chunk (emulated)", () => batches(withChunk)],
];
for (let i = 0; i < 2; i++) for (const [, run] of paths) run();
const times = new Map<string, number[]>(paths.map(([name]) => [name, []]));
for (let round = 0; round < rounds; round++) for (const [name, run] of paths) times.get(name)!.push(cpuMs(run));
const bytes = (payloads: string[]) => payloads.reduce((sum, p) => sum + Buffer.byteLength(p), 0) / count;
process.stdout.write(`${count} text delta messages, ${perBatch} per reply batch, CPU ms (median of ${rounds} rounds, min)\n`);
for (const [name, samples] of times) {
  const sorted = [...samples].sort((a, b) => a - b);
  process.stdout.write(`${name.padEnd(38)} ${sorted[Math.floor(sorted.length / 2)]!.toFixed(0).padStart(6)} ms  (min ${sorted[0]!.toFixed(0)})\n`);
}
process.stdout.write(`reply batch bytes per message: message ${bytes(plain).toFixed(0)}, message + chunk ${bytes(chunked).toFixed(0)}\n`);
