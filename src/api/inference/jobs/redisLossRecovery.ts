import type { CompletionJob } from "../../../contracts/completionJob.ts";
import type { CompletionQueues } from "./completionQueues.ts";
import type { CompletionRecord, CompletionRecords } from "./completionRecords.ts";
import type { FollowedRecords } from "./followedRecords.ts";

/** What an API process keeps that Redis may have lost: the jobs it waits to see started, and the completions its clients follow. */
export type RecoveryState = {
  waiting: ReadonlyMap<string, { job: CompletionJob; record: CompletionRecord }>;
  followed: FollowedRecords;
  queues: CompletionQueues;
  records: CompletionRecords;
};

/** Tries of each step, a quarter second apart: the subscriber may be back before the connection that writes. */
const ATTEMPTS = 20;
const RETRY_MS = 250;

/**
 * Redis came back after a loss (a Redis without persistence may have lost the queue and the records):
 * every job this process still waits to see started is submitted again with its record, under the same
 * job id (BullMQ ignores an add whose job id it has, so a job that survived is not queued twice); then the
 * records of the running completions its clients listen to are written again where Redis lost them (a GET,
 * a resume, a cancel of one read it; the workers' watches count its listeners), with how many listen
 * through this process.
 */
export async function recoverAfterRedisLoss(state: RecoveryState): Promise<void> {
  await resubmitWaiting(state);
  await restoreFollowed(state);
}

async function resubmitWaiting({ waiting, queues, records }: RecoveryState): Promise<void> {
  for (let attempt = 0; attempt < ATTEMPTS && waiting.size > 0; attempt++) {
    let failed = 0;
    for (const { job, record } of [...waiting.values()]) {
      await Promise.all([queues.enqueue(job), records.create(record)]).catch(() => {
        failed++;
      });
    }
    if (failed === 0) return;
    await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
  }
}

async function restoreFollowed({ waiting, followed, records }: RecoveryState): Promise<void> {
  let pending = followed.all().filter(({ record }) => !waiting.has(record.completionId));
  for (let attempt = 0; attempt < ATTEMPTS && pending.length > 0; attempt++) {
    if (attempt > 0) await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
    const failed: typeof pending = [];
    for (const entry of pending) await records.restore(entry.record, entry.listeners).catch(() => failed.push(entry));
    pending = failed;
  }
}
