import { EngineError } from "../engine.ts";
import type {
  ChatMessage,
  ChatRequest,
  DeltaSink,
  EmbedResult,
  Engine,
  EngineCapabilities,
  EngineResult,
  TextRequest,
  ToolDefinition,
} from "../engine.ts";
import { ChatStreamAccumulator } from "./chatStreamAccumulator.ts";
import { engineErrorFromResponse } from "./engineErrorFromResponse.ts";
import { estimateChatTokens, estimateTokens } from "./estimateTokens.ts";
import { parseEmbeddings } from "./parseEmbeddings.ts";
import { SseParser } from "./sseParser.ts";
import { toEngineUsage } from "./toEngineUsage.ts";
import { toUpstreamChatBody } from "./toUpstreamChatBody.ts";
import { UpstreamCall } from "./upstreamCall.ts";
import { upstreamEngineOptions, type UpstreamEngineOptions, type UpstreamEngineOptionsInput } from "./upstreamEngineOptions.ts";

/**
 * An engine served by any OpenAI-compatible HTTP server (vLLM, SGLang, TGI, llama.cpp server, Ollama),
 * through Node's fetch. Chat is always streamed from the upstream with `stream_options.include_usage`,
 * so deltas are relayed as they come and usage is the upstream's own count.
 */
export class UpstreamEngine implements Engine {
  readonly #options: UpstreamEngineOptions;
  readonly #inFlight = new Set<UpstreamCall>();
  #closed = false;

  constructor(options: UpstreamEngineOptionsInput) {
    this.#options = upstreamEngineOptions.parse(options);
  }

  capabilities(): EngineCapabilities {
    return { ...this.#options.capabilities, contextLength: this.#options.contextLength };
  }

  async chat(request: ChatRequest, onDelta: DeltaSink, signal: AbortSignal): Promise<EngineResult> {
    const body = toUpstreamChatBody(request, { model: this.#options.model, reasoning: this.#options.capabilities.reasoning });
    const call = this.#open(signal);
    let draining = false;
    try {
      const response = await this.#post(call, "/chat/completions", body);
      const stream = response.body;
      if (stream === null) throw new EngineError("internal", "upstream answered without a body");
      const reader = stream.getReader();
      const parser = new SseParser();
      const accumulator = new ChatStreamAccumulator(onDelta);
      try {
        for (;;) {
          let read: Awaited<ReturnType<typeof reader.read>>;
          try {
            read = await reader.read();
          } catch (error) {
            throw call.toError(error, "stream");
          }
          call.touch();
          const events = read.done ? parser.end() : parser.push(read.value);
          // handle() throws EngineError for an error inside the stream; onDelta's own errors pass as they are.
          for (const event of events) if (accumulator.handle(event)) break;
          if (accumulator.done || read.done) break;
        }
      } catch (error) {
        void reader.cancel().catch(() => undefined);
        throw error;
      }
      call.throwIfAborted();
      if (!accumulator.done && accumulator.finishReason === null) {
        throw new EngineError("internal", "upstream ended the stream before the completion finished");
      }
      if (accumulator.done) {
        // Read the rest of the body (normally just the end of the chunked encoding) without holding the
        // result back, so the connection goes back to the pool instead of being torn down.
        draining = true;
        void this.#drain(reader, call);
      }
      return {
        finishReason: accumulator.finishReason ?? "stop",
        usage: toEngineUsage(accumulator.usage, accumulator.generated, () => estimateChatTokens(request.messages, request.tools)),
      };
    } finally {
      if (!draining) this.#release(call);
    }
  }

  /** Per the service spec a text prompt is served as a chat of one user message. */
  complete(request: TextRequest, onDelta: DeltaSink, signal: AbortSignal): Promise<EngineResult> {
    const { prompt, ...sampling } = request;
    return this.chat({ ...sampling, messages: [{ role: "user", content: prompt }] }, onDelta, signal);
  }

  async embed(texts: string[], signal: AbortSignal): Promise<EmbedResult> {
    if (texts.length === 0) return { embeddings: [], promptTokens: 0 };
    const call = this.#open(signal);
    try {
      const response = await this.#post(call, "/embeddings", { model: this.#options.model, input: texts });
      let text: string;
      try {
        text = await response.text();
      } catch (error) {
        throw call.toError(error, "stream");
      }
      return parseEmbeddings(text, texts);
    } finally {
      this.#release(call);
    }
  }

  /** An estimate (see estimateTokens.ts), used for admission only. */
  async countChatTokens(messages: ChatMessage[], tools?: ToolDefinition[]): Promise<number> {
    return estimateChatTokens(messages, tools);
  }

  /** An estimate (see estimateTokens.ts), used for admission only. */
  async countTokens(text: string): Promise<number> {
    return estimateTokens(text);
  }

  /** Ends every exchange in flight (they fail as unavailable) and refuses new ones. */
  async close(): Promise<void> {
    this.#closed = true;
    for (const call of this.#inFlight) call.close();
  }

  #open(signal: AbortSignal): UpstreamCall {
    if (this.#closed) throw new EngineError("unavailable", "engine closed");
    const call = new UpstreamCall(signal, this.#options.requestTimeoutMs);
    call.throwIfAborted();
    this.#inFlight.add(call);
    return call;
  }

  #release(call: UpstreamCall): void {
    call.dispose();
    this.#inFlight.delete(call);
  }

  async #post(call: UpstreamCall, path: string, body: unknown): Promise<Response> {
    const headers: Record<string, string> = { "content-type": "application/json", accept: "text/event-stream, application/json" };
    if (this.#options.apiKey !== undefined) headers.authorization = `Bearer ${this.#options.apiKey}`;
    call.touch();
    let response: Response;
    try {
      response = await fetch(this.#options.baseUrl + path, { method: "POST", headers, body: JSON.stringify(body), signal: call.signal });
    } catch (error) {
      throw call.toError(error, "connect");
    }
    if (response.ok) return response;
    let text = "";
    try {
      text = await response.text();
    } catch (error) {
      throw call.toError(error, "connect");
    }
    throw engineErrorFromResponse(response.status, text);
  }

  async #drain(reader: ReadableStreamDefaultReader<Uint8Array>, call: UpstreamCall): Promise<void> {
    try {
      for (;;) {
        const { done } = await reader.read();
        if (done) return;
        call.touch();
      }
    } catch {
      // The answer is already complete; a connection that breaks now costs nothing.
    } finally {
      this.#release(call);
    }
  }
}
