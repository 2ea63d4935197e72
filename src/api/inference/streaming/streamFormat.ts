import type { EngineDeltaMessage, Usage } from "../../../contracts/deltaMessage.ts";

import type { FinishReason } from "../jobs/collectReply.ts";

export type { FinishReason };

/** How one endpoint turns worker messages into its stream chunks (OpenAI wire format). */
export type StreamFormat = {
  /** The chunk for a delta (first: the first chunk of the stream), or null when it carries nothing to send. */
  delta(delta: EngineDeltaMessage, first: boolean): unknown;
  finish(reason: FinishReason, first: boolean): unknown;
  usage(usage: Usage): unknown;
};

/** The usage object of the OpenAI wire format. */
export function usageBody(usage: Usage, withReasoning: boolean) {
  return {
    prompt_tokens: usage.promptTokens,
    completion_tokens: usage.completionTokens,
    total_tokens: usage.promptTokens + usage.completionTokens,
    ...(withReasoning ? { completion_tokens_details: { reasoning_tokens: usage.reasoningTokens } } : {}),
  };
}

export type StreamHead = { id: string; created: number; model: string; includeUsage: boolean };

/**
 * The chunk builder of one stream: every chunk carries the completion's id, object type, created and
 * model, and `usage: null` when the client asked for a final usage chunk (stream_options.include_usage).
 */
export function chunkBuilder(object: "chat.completion.chunk" | "text_completion", head: StreamHead) {
  return (choices: unknown[], extra: Record<string, unknown> = {}) => ({
    id: head.id,
    object,
    created: head.created,
    model: head.model,
    choices,
    ...(head.includeUsage ? { usage: null } : {}),
    ...extra,
  });
}
