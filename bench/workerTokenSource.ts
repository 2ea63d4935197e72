import { EventEmitter } from "node:events";
import type { ChatOptions, ChatRequest, DeltaSink, EmbedResult, Engine, EngineCapabilities, EngineResult } from "../workers/engines/engine.ts";
import { ChatStreamAccumulator } from "../workers/engines/upstream/chatStreamAccumulator.ts";
import { relayChatStream } from "../workers/engines/upstream/relayChatStream.ts";
import { toEngineUsage } from "../workers/engines/upstream/toEngineUsage.ts";
import { UpstreamCall } from "../workers/engines/upstream/upstreamCall.ts";
import type { UpstreamAnswer } from "../workers/engines/upstream/upstreamHttp.ts";
import { standInToken } from "./engineStandIn.ts";

export type TokenPacing = { ttftMs: number; interTokenMs: number; tokens: number };

/**
 * The body of one streamed chat as an upstream's socket delivers it, without a socket: a response-like
 * emitter that gets, per token, the SSE frame the engine stand-in writes (vLLM's chunk shape, one frame
 * per token, the last with the finish, the usage chunk and `[DONE]`) as the text a node:http response with
 * setEncoding("utf8") emits (flat strings), paced by timers like the stand-in. What runs on 'data' is the worker's.
 */
export function fakeUpstreamAnswer(pacing: TokenPacing, frames = upstreamFrames(pacing.tokens)): UpstreamAnswer & { start(): void } {
  const response = Object.assign(new EventEmitter(), { setEncoding: () => response, readableEnded: false });
  const request = Object.assign(new EventEmitter(), { destroy: () => undefined });
  const start = (): void => {
    const began = performance.now();
    let next = 0;
    const emit = (): void => {
      const last = next === frames.length - 1;
      if (last) response.readableEnded = true;
      response.emit("data", frames[next]);
      if (last) {
        response.emit("end");
        return;
      }
      next++;
      setTimeout(emit, Math.max(0, began + pacing.ttftMs + next * pacing.interTokenMs - performance.now()));
    };
    setTimeout(emit, pacing.ttftMs);
  };
  return { request: request as unknown as UpstreamAnswer["request"], response: response as unknown as UpstreamAnswer["response"], start };
}

/**
 * The text of each read of a stream of `tokens` tokens, made once and shared by every stream (so the
 * bench itself allocates next to nothing per token), as flat strings like a StringDecoder's.
 */
export function upstreamFrames(tokens: number): string[] {
  const created = 1_764_160_000;
  const frame = (choices: unknown[], usage?: unknown) =>
    `data: ${JSON.stringify({ id: "chatcmpl-standin", object: "chat.completion.chunk", created, model: "stand-in", choices, ...(usage ? { usage } : {}) })}\n\n`;
  const frames: string[] = [];
  for (let next = 0; next < tokens; next++) {
    let out = frame([{ index: 0, delta: next === 0 ? { role: "assistant", content: standInToken(0) } : { content: standInToken(next) }, finish_reason: null }]);
    if (next === tokens - 1) {
      out += frame([{ index: 0, delta: {}, finish_reason: "length" }]);
      out += frame([], { prompt_tokens: 12, completion_tokens: tokens, total_tokens: 12 + tokens });
      out += "data: [DONE]\n\n";
    }
    frames.push(Buffer.from(out, "utf8").toString("utf8"));
  }
  return frames;
}

/**
 * UpstreamEngine.chat from the answer on (ChatStreamAccumulator, relayChatStream, toEngineUsage), fed by
 * fakeUpstreamAnswer instead of an HTTP exchange: the adapter's per-token path as it runs in a worker.
 */
export class FakeUpstreamEngine implements Engine {
  readonly #pacing: TokenPacing;
  readonly #frames: string[];

  constructor(pacing: TokenPacing) {
    this.#pacing = pacing;
    this.#frames = upstreamFrames(pacing.tokens);
  }

  capabilities(): EngineCapabilities {
    return { continuation: false, contextLength: 4096 } as EngineCapabilities;
  }

  async chat(_request: ChatRequest, onDelta: DeltaSink, signal: AbortSignal, _options?: ChatOptions): Promise<EngineResult> {
    const call = new UpstreamCall(signal, 30_000);
    try {
      const answer = fakeUpstreamAnswer(this.#pacing, this.#frames);
      call.touch();
      answer.start();
      const accumulator = new ChatStreamAccumulator(onDelta);
      await relayChatStream(call, answer, accumulator);
      return { finishReason: accumulator.finishReason ?? "stop", usage: toEngineUsage(accumulator.usage, accumulator.generated, () => 12) };
    } finally {
      call.dispose();
    }
  }

  async embed(): Promise<EmbedResult> {
    throw new Error("not in this bench");
  }
  async countChatTokens(): Promise<number> {
    return 12;
  }
  async countTokens(text: string): Promise<number> {
    return Math.ceil(text.length / 4);
  }
  maxConcurrency(): number {
    return 1024;
  }
  async close(): Promise<void> {}
}
