import type { EngineDeltaMessage, Usage } from "../../../contracts/deltaMessage.ts";

import type { FinishReason } from "../jobs/collectReply.ts";

export type { FinishReason };

/** How one endpoint turns worker messages into its stream chunks (OpenAI wire format). */
export type StreamFormat = {
  /**
   * The chunk for a delta as its JSON text (what the event's `data:` carries), or null when the delta
   * carries nothing to send (first: the first chunk of the stream). Written as text around the delta's
   * strings (its tool calls and logprobs stringified as they are), with no chunk object: equal to
   * JSON.stringify(deltaChunk(...)), which each format's unit test holds it to. The relay's per-token path.
   * Built here, not by the worker: a chunk text carried in the message (bench/relayMessages.ts) saved
   * the API no more than this does, cost the worker more than that, and tripled a message's bytes in Redis.
   */
  deltaJson(delta: EngineDeltaMessage, first: boolean): string | null;
  /** The same chunk as an object, or null: the reference deltaJson is held to. */
  deltaChunk(delta: EngineDeltaMessage, first: boolean): unknown;
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

type ChunkObject = "chat.completion.chunk" | "text_completion";

/**
 * The chunk builder of one stream: every chunk carries the completion's id, object type, created and
 * model, and `usage: null` when the client asked for a final usage chunk (stream_options.include_usage).
 */
export function chunkBuilder(object: ChunkObject, head: StreamHead) {
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

/**
 * The JSON text of the same chunks around their choices, computed once per stream: a chunk is
 * `open + <choices JSON> + close`, equal to JSON.stringify(chunkBuilder(object, head)(choices)).
 */
export function chunkFrame(object: ChunkObject, head: StreamHead): { open: string; close: string } {
  const fields = JSON.stringify({ id: head.id, object, created: head.created, model: head.model });
  return { open: `${fields.slice(0, -1)},"choices":`, close: head.includeUsage ? ',"usage":null}' : "}" };
}
