/**
 * The one interface every inference engine adapter implements (embedded llama.cpp, upstream
 * OpenAI-compatible HTTP). Workers only ever talk to an engine through this. The request types are the
 * API-worker contract's (src/contracts/engineRequestSchemas.ts, inferred from its zod schemas).
 */
import type { ChatMessage, EngineChatRequest, ToolDefinition } from "../../src/contracts/engineRequestSchemas.ts";
import type { ModelCapabilities } from "../../src/models/modelCapabilities.ts";

export type {
  ChatMessage,
  ChatRole,
  EngineChatRequest as ChatRequest,
  JsonSchema,
  ReasoningEffort,
  ResponseFormat,
  SamplingParams,
  ToolCall,
  ToolChoice,
  ToolDefinition,
} from "../../src/contracts/engineRequestSchemas.ts";

export type TopLogprob = { token: string; logprob: number; bytes: number[] };
export type TokenLogprob = TopLogprob & { top_logprobs: TopLogprob[] };

export type ToolCallDelta = {
  index: number;
  id?: string;
  type?: "function";
  function?: { name?: string; arguments?: string };
};

/** A piece of output. Concatenating every `content` in order gives the whole answer. */
export type EngineDelta = {
  content?: string;
  /** Thinking of reasoning models, kept apart from the answer. */
  reasoning?: string;
  toolCalls?: ToolCallDelta[];
  logprobs?: TokenLogprob[];
  /**
   * Completion tokens (reasoning included) generated for this delta: every token since the previous
   * delta, this one's included. Absent when the engine cannot tell. Written with the delta to the
   * replay stream, so a worker continuing the reply after a crash knows exactly what was delivered.
   */
  tokens?: number;
};

export type FinishReason = "stop" | "length" | "tool_calls";

export type EngineUsage = {
  promptTokens: number;
  /** All generated tokens, reasoning included. */
  completionTokens: number;
  /** The part of completionTokens spent on reasoning. */
  reasoningTokens: number;
};

export type EngineResult = { finishReason: FinishReason; usage: EngineUsage };

export type EmbedResult = { embeddings: number[][]; promptTokens: number };

/**
 * What an engine serves: the model capabilities of the one list (src/models/modelCapabilities.ts, the
 * same names as the registry and the models API), plus what only workers need to know.
 */
export type EngineCapabilities = ModelCapabilities & {
  /** chat() can continue a reply already begun (ChatOptions.continueFrom). */
  continuation: boolean;
  /**
   * chat() can also continue a reply held to a grammar (response_format json_object / json_schema, a
   * tool call forced by name): the grammar is advanced over the text already sent. Only with `continuation`.
   */
  grammarContinuation?: boolean;
  contextLength: number;
};

export type DeltaSink = (delta: EngineDelta) => void;

export type ChatOptions = {
  /**
   * The start of the assistant's reply, already generated (by a worker that died): the engine continues
   * this text as the same reply instead of starting a new one. Deltas carry only the new text; usage
   * counts the request's prompt without this text, and only the newly generated tokens. Only with
   * `capabilities().continuation`; with a response format, or a tool call forced by name (then this is
   * the call's arguments sent so far, possibly "", and its id and name were sent: not sent again), only
   * with `capabilities().grammarContinuation`; never with tool_choice "auto" or "required".
   */
  continueFrom?: string;
  /**
   * The completion tokens `continueFrom` was generated as (counted when it was delivered): an engine
   * whose upstream counts the continued text as prompt takes this off the prompt tokens it reports.
   */
  continuedTokens?: number;
};

export interface Engine {
  capabilities(): EngineCapabilities;
  /** Streams a chat reply through onDelta; resolves when generation ends. Rejects with an AbortError-like error when signal aborts. */
  chat(request: EngineChatRequest, onDelta: DeltaSink, signal: AbortSignal, options?: ChatOptions): Promise<EngineResult>;
  embed(texts: string[], signal: AbortSignal): Promise<EmbedResult>;
  /** Exact prompt token count of a chat request as the engine would render it. */
  countChatTokens(messages: ChatMessage[], tools?: ToolDefinition[]): Promise<number>;
  countTokens(text: string): Promise<number>;
  /**
   * Jobs of one model a worker gives this engine at once when the registry names no maxConcurrency (the
   * embedded engine decides from the machine and the model; an upstream server batches on its own).
   */
  maxConcurrency(): number;
  close(): Promise<void>;
}

/** Thrown by engines for failures the API should map to an OpenAI error. */
export class EngineError extends Error {
  readonly kind: "invalid_request" | "unavailable" | "internal";
  readonly param: string | null;
  /** OpenAI's error code for the client, where one says more than the kind (`context_length_exceeded`). */
  readonly code: string | null;
  constructor(kind: EngineError["kind"], message: string, param: string | null = null, code: string | null = null) {
    super(message);
    this.name = "EngineError";
    this.kind = kind;
    this.param = param;
    this.code = code;
  }
}

/** OpenAI's code of a prompt that does not fit the model's context. */
export const CONTEXT_LENGTH_EXCEEDED = "context_length_exceeded";
