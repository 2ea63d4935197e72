import { EngineError } from "../engine.ts";
import type { ChatMessage, ChatOptions, ChatRequest, DeltaSink, EmbedResult, Engine, EngineCapabilities, EngineResult, ToolDefinition } from "../engine.ts";
import { refuseUndeclaredChat, refuseUndeclaredEmbeddings } from "../refuseUndeclared.ts";
import { ChatStreamAccumulator } from "./chatStreamAccumulator.ts";
import { estimateChatTokens, estimateTokens } from "./estimateTokens.ts";
import { parseEmbeddings } from "./parseEmbeddings.ts";
import { relayChatStream } from "./relayChatStream.ts";
import { toEngineUsage } from "./toEngineUsage.ts";
import { toUpstreamChatBody } from "./toUpstreamChatBody.ts";
import { UpstreamCall } from "./upstreamCall.ts";
import { readText, UpstreamHttp } from "./upstreamHttp.ts";
import { upstreamEngineOptions, type UpstreamEngineOptions, type UpstreamEngineOptionsInput } from "./upstreamEngineOptions.ts";

/** Requests a worker sends one upstream model at once when the registry names no maxConcurrency. */
export const DEFAULT_UPSTREAM_CONCURRENCY = 16;

/**
 * An engine served by any OpenAI-compatible HTTP server (vLLM, SGLang, TGI, llama.cpp server, Ollama),
 * through node:http with a keep-alive connection pool (see upstreamHttp.ts). Chat is always streamed
 * from the upstream with `stream_options.include_usage`, so deltas are relayed as they come and usage
 * is the upstream's own count.
 */
export class UpstreamEngine implements Engine {
  readonly #options: UpstreamEngineOptions;
  readonly #http: UpstreamHttp;
  readonly #inFlight = new Set<UpstreamCall>();
  #closed = false;

  constructor(options: UpstreamEngineOptionsInput) {
    this.#options = upstreamEngineOptions.parse(options);
    this.#http = new UpstreamHttp(this.#options.baseUrl, this.#options.apiKey);
  }

  capabilities(): EngineCapabilities {
    return { ...this.#options.capabilities, continuation: this.#options.continueFinalMessage, contextLength: this.#options.contextLength };
  }

  /**
   * With `continueFrom` (only when the registry says the upstream supports it), the text is sent as a
   * final assistant message with vLLM's `continue_final_message`; the upstream counts it as prompt, so
   * its tokens are taken off the reported prompt tokens: `continuedTokens` (as counted when they were
   * generated), or an estimate when not given.
   */
  async chat(request: ChatRequest, onDelta: DeltaSink, signal: AbortSignal, options: ChatOptions = {}): Promise<EngineResult> {
    return this.#withoutKey(() => this.#chat(request, onDelta, signal, options));
  }

  async #chat(request: ChatRequest, onDelta: DeltaSink, signal: AbortSignal, options: ChatOptions): Promise<EngineResult> {
    refuseUndeclaredChat(request, this.#options.capabilities);
    const continueFrom = options.continueFrom === "" ? undefined : options.continueFrom;
    if (continueFrom !== undefined && !this.#options.continueFinalMessage) {
      throw new EngineError("internal", "This upstream is not configured to continue a final assistant message");
    }
    const body = toUpstreamChatBody(request, {
      model: this.#options.model,
      reasoning: this.#options.capabilities.reasoning,
      ...(continueFrom === undefined ? {} : { continueFrom }),
    });
    const call = this.#open(signal);
    let draining = false;
    try {
      const answer = await this.#http.post(call, "/chat/completions", body);
      // The tools the model may call: none without tools or with tool_choice "none".
      const offered = new Set(request.toolChoice === "none" ? [] : (request.tools ?? []).map((tool) => tool.function.name));
      const accumulator = new ChatStreamAccumulator(onDelta, request.maxTokens, offered);
      await relayChatStream(call, answer, accumulator);
      call.throwIfAborted();
      // Cut at max tokens (the upstream went on past them): its connection is dropped, not drained.
      if (accumulator.cut) answer.request.destroy();
      if (!accumulator.done && accumulator.finishReason === null) {
        throw new EngineError("internal", "upstream ended the stream before the completion finished");
      }
      if (!answer.response.readableEnded && !accumulator.cut) {
        // `[DONE]` came before the end of the body (normally just the end of the chunked encoding):
        // answer now, and release the call once relayChatStream has read the rest, so the connection
        // goes back to the pool instead of being torn down.
        draining = true;
        const release = (): void => this.#release(call);
        answer.response.once("end", release).once("close", release);
      }
      const usage = toEngineUsage(accumulator.usage, accumulator.generated, () => estimateChatTokens(request.messages, request.tools));
      if (continueFrom !== undefined && accumulator.usage?.prompt_tokens != null) {
        usage.promptTokens = Math.max(0, usage.promptTokens - (options.continuedTokens ?? estimateTokens(continueFrom)));
      }
      // A call forced by name ends with "stop", as OpenAI's do (an upstream may say "tool_calls", as older vLLM did).
      const finishReason = accumulator.finishReason === "tool_calls" && typeof request.toolChoice === "object" ? "stop" : (accumulator.finishReason ?? "stop");
      return { finishReason, usage };
    } finally {
      if (!draining) this.#release(call);
    }
  }

  async embed(texts: string[], signal: AbortSignal): Promise<EmbedResult> {
    refuseUndeclaredEmbeddings(this.#options.capabilities);
    if (texts.length === 0) return { embeddings: [], promptTokens: 0 };
    return this.#withoutKey(async () => {
      const call = this.#open(signal);
      try {
        const answer = await this.#http.post(call, "/embeddings", { model: this.#options.model, input: texts });
        return parseEmbeddings(await readText(call, answer, "stream"), texts);
      } finally {
        this.#release(call);
      }
    });
  }

  /**
   * Runs an exchange; an error whose message holds the upstream's key (a server echoing the credential it
   * was sent, as OpenAI does in a 401) has it replaced before the error goes anywhere (a log, a client).
   */
  async #withoutKey<T>(exchange: () => Promise<T>): Promise<T> {
    try {
      return await exchange();
    } catch (error) {
      const key = this.#options.apiKey;
      if (key === undefined || !(error instanceof EngineError) || !error.message.includes(key)) throw error;
      throw new EngineError(error.kind, error.message.replaceAll(key, "[redacted]"), error.param, error.code);
    }
  }

  /** Jobs in flight at once by default: the upstream server batches them itself. */
  maxConcurrency(): number {
    return DEFAULT_UPSTREAM_CONCURRENCY;
  }

  /** An estimate (see estimateTokens.ts), used for admission only. */
  async countChatTokens(messages: ChatMessage[], tools?: ToolDefinition[]): Promise<number> {
    return estimateChatTokens(messages, tools);
  }

  /** An estimate (see estimateTokens.ts), used for admission only. */
  async countTokens(text: string): Promise<number> {
    return estimateTokens(text);
  }

  /** Ends every exchange in flight (they fail as unavailable), closes the pooled connections and refuses new ones. */
  async close(): Promise<void> {
    this.#closed = true;
    for (const call of this.#inFlight) call.close();
    this.#http.close();
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
}
