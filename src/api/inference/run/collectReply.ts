import { InternalApiError } from "../../http/errors.ts";
import type { Usage } from "../../../contracts/deltaMessage.ts";
import type { RunningJob } from "../relay/runningJob.ts";
import { jobErrorToApiError } from "./jobErrorToApiError.ts";
import { ReplyAccumulator } from "./replyAccumulator.ts";
import type { FinishReason } from "./streamFormat.ts";

export type CollectedReply = { reply: ReplyAccumulator; finishReason: FinishReason; usage: Usage };
export type CollectedEmbeddings = { embeddings: number[][]; usage: Usage };

/** Waits for the whole generated reply of a job (non-streaming answers). */
export async function collectReply(job: RunningJob): Promise<CollectedReply> {
  const reply = new ReplyAccumulator();
  let finishReason: FinishReason | null = null;
  try {
    for (;;) {
      const message = await job.next();
      if (message.type === "delta") reply.add(message.delta);
      else if (message.type === "finish") finishReason = message.finishReason;
      else if (message.type === "error") throw jobErrorToApiError(message.error);
      else if (message.type === "usage") {
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
      else if (message.type === "error") throw jobErrorToApiError(message.error);
      else if (message.type === "usage") {
        if (!embeddings) throw new InternalApiError("The worker ended the job without embeddings.");
        return { embeddings, usage: message.usage };
      }
    }
  } finally {
    job.release();
  }
}
