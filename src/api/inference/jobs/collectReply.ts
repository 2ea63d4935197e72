import { InternalApiError } from "../../http/errors.ts";
import type { Usage } from "../../../contracts/deltaMessage.ts";
import type { RunningJob } from "./runningJob.ts";
import { jobErrorToApiError } from "./jobErrorToApiError.ts";
import { ReplyAccumulator } from "./replyAccumulator.ts";

/** Why a generation stopped (OpenAI's finish_reason). */
export type FinishReason = "stop" | "length" | "tool_calls";

/**
 * `ended`: the reply stops where a cancel (or nobody listening) stopped its job, or where it failed after
 * it was charged for what it had delivered; `usage` is what was charged.
 */
export type CollectedReply = { reply: ReplyAccumulator; finishReason: FinishReason; usage: Usage; ended?: "cancelled" | "failed" };
export type CollectedEmbeddings = { embeddings: number[][]; usage: Usage };

/**
 * Waits for the whole generated reply of a job (non-streaming answers). With `partialWhenEnded` (a
 * GET of a stored completion), a job cancelled after it generated something answers the partial reply
 * that was charged (finish_reason `length`: it was cut off) instead of the 409, and so does a job that
 * failed after it was charged for what it delivered (instead of a 500).
 */
export async function collectReply(job: RunningJob, options: { partialWhenEnded?: boolean } = {}): Promise<CollectedReply> {
  const reply = new ReplyAccumulator();
  let finishReason: FinishReason | null = null;
  try {
    for (;;) {
      const message = await job.next();
      if (message.type === "delta") reply.add(message.delta);
      else if (message.type === "finish") finishReason = message.finishReason;
      else if (message.type === "error") {
        if (options.partialWhenEnded && message.usage && (message.error.kind === "cancelled" || message.error.kind === "internal")) {
          return { reply, finishReason: finishReason ?? "length", usage: message.usage, ended: message.error.kind === "cancelled" ? "cancelled" : "failed" };
        }
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
