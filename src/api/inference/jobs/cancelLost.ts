import type { CompletionJob } from "../../../contracts/completionJob.ts";
import { retryWhileAway } from "../../../redis/retryWhileAway.ts";
import type { CompletionQueues } from "./completionQueues.ts";

/** How long the API keeps trying to tell a worker what a lost request's client got (Redis coming back). */
const LOST_CANCEL_RETRY_MS = 10_000;

/**
 * Tells the job's worker that its request ended early and what its client was sent, so that only that
 * is charged; tried again while Redis is not back yet (the request ended because of it), for a while.
 */
export async function cancelLost(queues: CompletionQueues, job: Pick<CompletionJob, "model" | "completionId">, relayedSeq: number): Promise<void> {
  await retryWhileAway(() => queues.cancel(job.model, job.completionId, "lost", relayedSeq), { forMs: LOST_CANCEL_RETRY_MS, intervalMs: 250 });
}
