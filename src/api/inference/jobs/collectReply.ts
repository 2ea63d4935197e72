import { InternalApiError } from "../../http/errors.ts";
import type { Usage } from "../../../contracts/deltaMessage.ts";
import type { RunningJob } from "./runningJob.ts";
import { jobErrorToApiError } from "./jobErrorToApiError.ts";
import { ReplyAccumulator } from "./replyAccumulator.ts";

/** Why a generation stopped (OpenAI's finish_reason). */
export type FinishReason = "stop" | "length" | "tool_calls";

/** `cancelled`: the reply stops where a cancel (or nobody listening) stopped its job; `usage` is what was charged. */
export type CollectedReply = { reply: ReplyAccumulator; finishReason: FinishReason; usage: Usage; cancelled?: boolean };
export type CollectedEmbeddings = { embeddings: number[][]; usage: Usage };

/**
 * Waits for the whole generated reply of a job (non-streaming answers). With `partialWhenCancelled` (a
 * GET of a stored completion), a job cancelled after it generated something answers the partial reply
 * that was charged (finish_reason `length`: it was cut off) instead of the 409.
 */
export async function collectReply(job: RunningJob, options: { partialWhenCancelled?: boolean } = {}): Promise<CollectedReply> {
  const reply = new ReplyAccumulator();
  let finishReason: FinishReason | null = null;
  try {
    for (;;) {
      const message = await job.next();
      if (message.type === "delta") reply.add(message.delta);
      else if (message.type === "finish") finishReason = message.finishReason;
      else if (message.type === "error") {
        if (options.partialWhenCancelled && message.error.kind === "cancelled" && message.usage)
          return { reply, finishReason: finishReason ?? "length", usage: message.usage, cancelled: true };
        throw jobErrorToApiError(message.error, message.usage);
      } else if (message.type === "usage") {
        if (!finishReason) throw new InternalApiError("The worker ended the job without a finish reason.");
        return { reply, finishReason, usage: message.usage };
      }
    }
  } finally {
    job.release();
  }
}

/** Waits for the embeddings of a job. */
export async function collectEmbeddings(job: RunningJob): Promise<CollectedEmbeddings> {
  let embeddings: number[][] | null = null;
  try {
    for (;;) {
      const message = await job.next();
      if (message.type === "embeddings") embeddings = message.embeddings;
      else if (message.type === "error") throw jobErrorToApiError(message.error, message.usage);
      else if (message.type === "usage") {
        if (!embeddings) throw new InternalApiError("The worker ended the job without embeddings.");
        return { embeddings, usage: message.usage };
      }
    }
  } finally {
    job.release();
  }
}
