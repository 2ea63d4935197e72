import type { EngineDeltaMessage, Usage } from "../../../contracts/deltaMessage.ts";
import type { CollectedReply } from "../run/collectReply.ts";
import { chunkBuilder, usageBody, type FinishReason, type StreamFormat } from "../run/streamFormat.ts";

type Head = { id: string; created: number; model: string; includeUsage: boolean };

/** text_completion bodies and stream chunks (OpenAI wire format; logprobs are not served here). */
export function textCompletionBody(head: Omit<Head, "includeUsage">, collected: CollectedReply) {
  return {
    id: head.id,
    object: "text_completion" as const,
    created: head.created,
    model: head.model,
    choices: [{ text: collected.reply.content, index: 0, logprobs: null, finish_reason: collected.finishReason }],
    usage: usageBody(collected.usage, false),
  };
}

export function completionStreamFormat(head: Head): StreamFormat {
  const chunk = chunkBuilder("text_completion", head);
  return {
    delta(delta: EngineDeltaMessage) {
      if (!delta.content) return null;
      return chunk([{ text: delta.content, index: 0, logprobs: null, finish_reason: null }]);
    },
    finish(reason: FinishReason) {
      return chunk([{ text: "", index: 0, logprobs: null, finish_reason: reason }]);
    },
    usage(usage: Usage) {
      return chunk([], { usage: usageBody(usage, false) });
    },
  };
}
