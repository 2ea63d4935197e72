/**
 * The one interface every inference engine adapter implements (embedded llama.cpp, upstream
 * OpenAI-compatible HTTP). Workers only ever talk to an engine through this.
 *
 * Names follow the OpenAI wire format where a value is passed through unchanged (tool calls,
 * response_format, logprob entries), and camelCase where the adapter interprets it.
 */

export type ChatRole = "system" | "user" | "assistant" | "tool";

export type ToolCall = {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
};

export type ChatMessage = {
  role: ChatRole;
  content: string | null;
  name?: string;
  tool_calls?: ToolCall[];
  tool_call_id?: string;
};

export type JsonSchema = Record<string, unknown>;

export type ToolDefinition = {
  type: "function";
  function: { name: string; description?: string; parameters?: JsonSchema; strict?: boolean };
};

export type ToolChoice = "none" | "auto" | "required" | { type: "function"; function: { name: string } };

export type ResponseFormat =
  | { type: "text" }
  | { type: "json_object" }
  | { type: "json_schema"; json_schema: { name: string; description?: string; schema?: JsonSchema; strict?: boolean } };

export type ReasoningEffort = "low" | "medium" | "high";

export type SamplingParams = {
  /** Upper bound on generated tokens (answer + reasoning). Already resolved from max_tokens / max_completion_tokens. */
  maxTokens: number;
  temperature: number;
  topP: number;
  seed?: number;
  /** Stop sequences; never included in the output. */
  stop?: string[];
  presencePenalty: number;
  frequencyPenalty: number;
  logprobs?: boolean;
  /** 0..20, only with logprobs. */
  topLogprobs?: number;
};

export type ChatRequest = SamplingParams & {
  messages: ChatMessage[];
  tools?: ToolDefinition[];
  toolChoice?: ToolChoice;
  parallelToolCalls?: boolean;
  responseFormat?: ResponseFormat;
  reasoningEffort?: ReasoningEffort;
  /** Extra backend-specific parameters, passed through untouched by the upstream adapter. */
  extra?: Record<string, unknown>;
};

export type TextRequest = SamplingParams & {
  prompt: string;
  extra?: Record<string, unknown>;
};

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

export type EngineCapabilities = {
  chat: boolean;
  completions: boolean;
  embeddings: boolean;
  tools: boolean;
  jsonSchema: boolean;
  logprobs: boolean;
  reasoning: boolean;
  contextLength: number;
};

export type DeltaSink = (delta: EngineDelta) => void;

export interface Engine {
  capabilities(): EngineCapabilities;
  /** Streams a chat reply through onDelta; resolves when generation ends. Rejects with an AbortError-like error when signal aborts. */
  chat(request: ChatRequest, onDelta: DeltaSink, signal: AbortSignal): Promise<EngineResult>;
  /** Streams a text completion of a plain prompt. */
  complete(request: TextRequest, onDelta: DeltaSink, signal: AbortSignal): Promise<EngineResult>;
  embed(texts: string[], signal: AbortSignal): Promise<EmbedResult>;
  /** Exact prompt token count of a chat request as the engine would render it. */
  countChatTokens(messages: ChatMessage[], tools?: ToolDefinition[]): Promise<number>;
  countTokens(text: string): Promise<number>;
  close(): Promise<void>;
}

/** Thrown by engines for failures the API should map to an OpenAI error. */
export class EngineError extends Error {
  readonly kind: "invalid_request" | "unavailable" | "internal";
  readonly param: string | null;
  constructor(kind: EngineError["kind"], message: string, param: string | null = null) {
    super(message);
    this.name = "EngineError";
    this.kind = kind;
    this.param = param;
  }
}
