import { EngineError } from "../engine.ts";
import type { DeltaSink, EngineDelta, FinishReason, TokenLogprob, ToolCallDelta } from "../engine.ts";
import { ChatChunkSchema, type ChatChunk, type Usage } from "./upstreamWire.ts";
import { upstreamErrorDetail } from "./engineErrorFromResponse.ts";
import { plainChatChunk } from "./plainChatChunk.ts";

const encoder = new TextEncoder();

/**
 * Turns the SSE events of one streamed chat completion into EngineDeltas, each with its token count (choice 0 only: the adapter
 * never asks for more than one) and remembers the finish reason, the upstream's usage and whether
 * the stream is complete (`[DONE]` arrived, or the usage chunk after the finish). Throws EngineError("internal") for an error reported inside the stream or a chunk
 * that is not JSON.
 */
export class ChatStreamAccumulator {
  readonly #onDelta: DeltaSink;
  #finishReason: FinishReason | null = null;
  #usage: Usage | null = null;
  #done = false;
  /** For the usage estimate when the upstream sends none. */
  #contentBytes = 0;
  #reasoningBytes = 0;
  #deltaCount = 0;
  /** Completion tokens counted into the deltas so far (see #chunk). */
  #countedTokens = 0;
  /** The request's bound on generated tokens: an upstream that goes past it is cut there (`cut`). */
  readonly #maxTokens: number;
  #cut = false;

  /**
   * The tools the request lets the model call (none with `tool_choice: "none"`; null: any): a call of
   * another is dropped, its text kept. A request without tools gets no tool call, whatever the upstream sends.
   */
  readonly #toolsOffered: ReadonlySet<string> | null;
  /** The tool calls started so far (their indexes), and those whose name has not come yet (it must, by the finish). */
  readonly #toolCalls = new Set<number>();
  readonly #unnamed = new Set<number>();
  /** Calls dropped (a tool not offered): their later deltas are dropped too. */
  readonly #dropped = new Set<number>();

  constructor(onDelta: DeltaSink, maxTokens: number = Number.POSITIVE_INFINITY, toolsOffered: ReadonlySet<string> | null = null) {
    this.#onDelta = onDelta;
    this.#maxTokens = maxTokens;
    this.#toolsOffered = toolsOffered;
  }

  /**
   * The upstream sent more than the request's max tokens (it ignored max_tokens): the stream was ended
   * there, `length`, as OpenAI ends one (a probe's upstream sent 30 deltas for max_tokens 10: all reached
   * the client, 10 were charged). The rest of the body is not read: its connection is to be dropped.
   */
  get cut(): boolean {
    return this.#cut;
  }

  get done(): boolean {
    return this.#done;
  }
  get finishReason(): FinishReason | null {
    return this.#finishReason;
  }
  get usage(): Usage | null {
    return this.#usage;
  }
  get generated(): { contentBytes: number; reasoningBytes: number; deltaCount: number; countedTokens: number } {
    return { contentBytes: this.#contentBytes, reasoningBytes: this.#reasoningBytes, deltaCount: this.#deltaCount, countedTokens: this.#countedTokens };
  }

  /** Handles one event (its type and data); returns true once the stream is complete (`[DONE]`, or the usage chunk after the finish). */
  handle(event: string, eventData: string): boolean {
    if (this.#done) return true;
    const data = eventData.trim();
    if (event === "error") throw new EngineError("internal", `upstream stream failed: ${upstreamErrorDetail(data).message ?? "error event"}`);
    if (data === "[DONE]") {
      if (this.#unnamed.size > 0) throw new EngineError("internal", "upstream sent a tool call without its function's name");
      this.#done = true;
      return true;
    }
    if (data === "") return false;
    let json: unknown;
    try {
      json = JSON.parse(data);
    } catch {
      throw new EngineError("internal", "upstream sent a stream chunk that is not JSON");
    }
    this.#chunk(plainChatChunk(json) ?? validChunk(json), data);
    return this.#done;
  }

  /** Whether a tool call's delta is relayed: a call of a tool the request offers (its name may come in a later delta). */
  #keepsCall(call: ToolCallDelta): boolean {
    if (this.#dropped.has(call.index)) return false;
    const name = call.function?.name;
    if (name !== undefined && this.#toolsOffered !== null && !this.#toolsOffered.has(name)) {
      this.#dropped.add(call.index);
      this.#unnamed.delete(call.index);
      return false;
    }
    if (!this.#toolCalls.has(call.index)) {
      this.#toolCalls.add(call.index);
      if (name === undefined) this.#unnamed.add(call.index);
    } else if (name !== undefined) this.#unnamed.delete(call.index);
    return true;
  }

  /** The reply reached the request's max tokens while the upstream went on: it ends there, `length` (see `cut`). */
  #endAtMaxTokens(): void {
    this.#cut = true;
    this.#finishReason = "length";
    this.#done = true;
  }

  #chunk(chunk: ChatChunk, raw: string): void {
    if ((chunk.error !== undefined && chunk.error !== null) || chunk.object === "error") {
      throw new EngineError("internal", `upstream stream failed: ${upstreamErrorDetail(raw).message ?? "error chunk"}`);
    }
    if (chunk.usage) this.#usage = chunk.usage;
    // The usage chunk (no choices) after the finish is the stream's last, as include_usage sends it: the
    // answer is complete even if `[DONE]` never comes (a server that keeps the connection open would
    // otherwise hold a finished reply until the idle timeout, and end it as failed).
    if (chunk.usage && (chunk.choices ?? []).length === 0 && this.#finishReason !== null) {
      this.#done = true;
      return;
    }
    // The delta's token count: an upstream reporting usage on every chunk (vLLM's
    // `continuous_usage_stats`) says how many tokens it generated so far; otherwise one per chunk, as
    // OpenAI-compatible servers stream one chunk per generated token (a chunk holding several counts
    // as one: never more than were generated).
    const reported = chunk.usage?.completion_tokens;
    for (const choice of chunk.choices ?? []) {
      if ((choice.index ?? 0) !== 0) continue;
      const delta: EngineDelta = {};
      const content = storable(choice.delta?.content);
      if (content) delta.content = content;
      const reasoning = storable(choice.delta?.reasoning_content || choice.delta?.reasoning);
      if (reasoning) delta.reasoning = reasoning;
      const toolCalls = choice.delta?.tool_calls;
      if (toolCalls && toolCalls.length > 0 && this.#toolsOffered?.size !== 0) {
        const kept = toolCalls.map(toToolCallDelta).filter((call) => this.#keepsCall(call));
        if (kept.length > 0) delta.toolCalls = kept;
      }
      const logprobs = choice.logprobs?.content;
      if (logprobs && logprobs.length > 0) delta.logprobs = logprobs.map(toTokenLogprob);
      if (delta.content !== undefined || delta.reasoning !== undefined || delta.toolCalls !== undefined || delta.logprobs !== undefined) {
        if (this.#countedTokens >= this.#maxTokens) {
          this.#endAtMaxTokens();
          return;
        }
        // At least a token per MAX_CHARS_PER_TOKEN characters, whatever the upstream says: a delta of
        // 100,000 characters is not one token (a probe got a megabyte of text for max_tokens 10). Past the
        // tokens left, the delta is cut to what they can hold and the reply ends there.
        const left = this.#maxTokens - this.#countedTokens;
        const atLeast = Math.ceil(deltaChars(delta) / MAX_CHARS_PER_TOKEN);
        const overran = atLeast > left;
        if (overran) cutDelta(delta, left * MAX_CHARS_PER_TOKEN);
        this.#deltaCount++;
        this.#contentBytes += Buffer.byteLength(delta.content ?? "");
        this.#reasoningBytes += Buffer.byteLength(delta.reasoning ?? "");
        for (const call of delta.toolCalls ?? []) this.#contentBytes += Buffer.byteLength((call.function?.name ?? "") + (call.function?.arguments ?? ""));
        const reportedTotal = typeof reported === "number" && reported > this.#countedTokens ? reported : this.#countedTokens + 1;
        const total = Math.min(this.#maxTokens, Math.max(reportedTotal, this.#countedTokens + Math.min(atLeast, left)));
        delta.tokens = total - this.#countedTokens;
        this.#countedTokens = total;
        this.#onDelta(delta);
        if (overran) {
          this.#endAtMaxTokens();
          return;
        }
      }
      if (choice.finish_reason) {
        if (this.#unnamed.size > 0) throw new EngineError("internal", "upstream sent a tool call without its function's name");
        const reason = toFinishReason(choice.finish_reason);
        this.#finishReason = reason === "tool_calls" && this.#toolCalls.size === 0 ? "stop" : reason;
      }
    }
  }
}

/**
 * The most characters a token of any tokenizer holds (runs of spaces or symbols are the longest): a delta
 * counts at least one token per this many characters.
 */
const MAX_CHARS_PER_TOKEN = 128;

/** The characters of a delta's text, reasoning and tool calls (ids, names, arguments). */
function deltaChars(delta: EngineDelta): number {
  let chars = (delta.content?.length ?? 0) + (delta.reasoning?.length ?? 0);
  for (const call of delta.toolCalls ?? []) chars += (call.id?.length ?? 0) + (call.function?.name?.length ?? 0) + (call.function?.arguments?.length ?? 0);
  return chars;
}

/** Cuts a delta's text, then its reasoning, then its tool calls' ids, names and arguments, to `chars` characters in all. */
function cutDelta(delta: EngineDelta, chars: number): void {
  let left = chars;
  const take = (text: string): string => {
    const kept = cutAt(text, left);
    left -= kept.length;
    return kept;
  };
  if (delta.content !== undefined) delta.content = take(delta.content);
  if (delta.reasoning !== undefined) delta.reasoning = take(delta.reasoning);
  for (const call of delta.toolCalls ?? []) {
    if (call.id !== undefined) call.id = take(call.id);
    if (call.function?.name !== undefined) call.function.name = take(call.function.name);
    if (call.function?.arguments !== undefined) call.function.arguments = take(call.function.arguments);
  }
}

/** The first `chars` characters of `text`, not between the halves of a surrogate pair. */
function cutAt(text: string, chars: number): string {
  if (text.length <= chars) return text;
  const end = chars > 0 && /[\uD800-\uDBFF]/.test(text.charAt(chars - 1)) ? chars - 1 : chars;
  return text.slice(0, Math.max(0, end));
}

/** A NUL, or half of a surrogate pair without its other half. */
const UNSTORABLE = /\0|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/**
 * An upstream's text as the platform can store it, each NUL and lone surrogate replaced by U+FFFD: what
 * reaches the client live is what a later read of the stored reply gives (PostgreSQL's text takes
 * neither; a probe's upstream sent both, and strict JSON parsers refuse a lone surrogate).
 */
export function storable(text: string | null | undefined): string | null | undefined {
  if (!text) return text;
  UNSTORABLE.lastIndex = 0;
  return UNSTORABLE.test(text) ? text.replace(UNSTORABLE, "\uFFFD") : text;
}

/** Any chunk that is not a plain delta (see plainChatChunk.ts), checked against the full schema. */
function validChunk(json: unknown): ChatChunk {
  const parsed = ChatChunkSchema.safeParse(json);
  if (!parsed.success) throw new EngineError("internal", `upstream sent an unexpected stream chunk: ${parsed.error.issues[0]?.message ?? "invalid"}`);
  return parsed.data;
}

type WireToolCall = NonNullable<NonNullable<NonNullable<ChatChunk["choices"]>[number]["delta"]>["tool_calls"]>[number];
type WireLogprob = NonNullable<NonNullable<NonNullable<ChatChunk["choices"]>[number]["logprobs"]>["content"]>[number];

function toToolCallDelta(call: WireToolCall, position: number): ToolCallDelta {
  const out: ToolCallDelta = { index: call.index ?? position };
  if (call.id) out.id = storable(call.id)!;
  if (call.type === "function") out.type = "function";
  if (call.function) {
    const fn: NonNullable<ToolCallDelta["function"]> = {};
    if (typeof call.function.name === "string" && call.function.name !== "") fn.name = storable(call.function.name)!;
    if (typeof call.function.arguments === "string") fn.arguments = storable(call.function.arguments)!;
    out.function = fn;
  }
  return out;
}

function toTokenLogprob(entry: WireLogprob): TokenLogprob {
  return {
    token: entry.token,
    logprob: entry.logprob,
    bytes: entry.bytes ?? [...encoder.encode(entry.token)],
    top_logprobs: (entry.top_logprobs ?? []).map((top) => ({ token: top.token, logprob: top.logprob, bytes: top.bytes ?? [...encoder.encode(top.token)] })),
  };
}

/** `stop`, `length`, `tool_calls` as they are; the legacy `function_call` is a tool call; anything else (`content_filter`, `eos`, `abort`...) ends like a stop. */
function toFinishReason(reason: string): FinishReason {
  if (reason === "length") return "length";
  if (reason === "tool_calls" || reason === "function_call") return "tool_calls";
  return "stop";
}
