import type { EngineDeltaMessage, Usage } from "../../../../contracts/deltaMessage.ts";
import type { CollectedReply } from "../../jobs/collectReply.ts";
import { chunkBuilder, chunkFrame, usageBody, type FinishReason, type StreamFormat } from "../../streaming/streamFormat.ts";

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

/** One text_completion body for several prompts: a choice per prompt (index = the prompt's), usage summed. */
export function multiPromptCompletionBody(head: Omit<Head, "includeUsage">, replies: readonly CollectedReply[]) {
  const total = { promptTokens: 0, completionTokens: 0, reasoningTokens: 0 };
  for (const { usage } of replies) {
    total.promptTokens += usage.promptTokens;
    total.completionTokens += usage.completionTokens;
    total.reasoningTokens += usage.reasoningTokens;
  }
  return {
    ...textCompletionBody(head, replies[0]!),
    choices: replies.map((collected, index) => ({ text: collected.reply.content, index, logprobs: null, finish_reason: collected.finishReason })),
    usage: usageBody(total, false),
  };
}

export function completionStreamFormat(head: Head): StreamFormat {
  const chunk = chunkBuilder("text_completion", head);
  const { open, close } = chunkFrame("text_completion", head);
  return {
    deltaJson(delta: EngineDeltaMessage) {
      if (!delta.content) return null;
      return `${open}[{"text":${JSON.stringify(delta.content)},"index":0,"logprobs":null,"finish_reason":null}]${close}`;
    },
    deltaChunk(delta: EngineDeltaMessage) {
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
