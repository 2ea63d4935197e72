import { Queue } from "bullmq";
import type { CompletionJob } from "../src/contracts/completionJob.ts";
import type { InferenceKeys } from "../src/contracts/inferenceKeys.ts";
import { type Redis, redisAway } from "../src/redis/createRedis.ts";

/** BullMQ's states of a job that is still to run or running (its budget hold must stay). */
const QUEUED_OR_RUNNING = new Set(["waiting", "prioritized", "delayed", "active", "waiting-children"]);

/** How long one sweep waits for BullMQ's answers before it treats them as unknown. */
const ANSWER_WITHIN_MS = 5_000;

/**
 * Which of some completions' jobs BullMQ still has queued or running, in any model's queue (a job's id is
 * its completion id, as is its budget hold's): asked through BullMQ's public `Queue.getJobState`. Used by
 * the hold sweeper, so that an old hold is released only when its job is gone (a background response may
 * wait in line for hours, a long generation run for more than the holds' age limit).
 */
export class QueuedOrRunningJobs {
  readonly #redis: Redis;
  readonly #queues: Queue<CompletionJob>[];

  constructor(redis: Redis, keys: InferenceKeys, modelIds: readonly string[]) {
    this.#redis = redis;
    this.#queues = modelIds.map((modelId) => {
      const queue = new Queue<CompletionJob>(keys.queueName(modelId), { connection: redis, prefix: keys.prefix });
      queue.on("error", () => undefined);
      return queue;
    });
  }

  /** The ids among `completionIds` whose job is queued or running; null when BullMQ cannot be asked now (Redis away or silent). */
  async among(completionIds: readonly string[]): Promise<Set<string> | null> {
    if (completionIds.length === 0) return new Set();
    if (this.#redis.status !== "ready" || redisAway(this.#redis)) return null;
    let timer: NodeJS.Timeout | undefined;
    const silent = new Promise<null>((resolve) => {
      timer = setTimeout(() => resolve(null), ANSWER_WITHIN_MS);
    });
    const asked = (async () => {
      const live = new Set<string>();
      for (const id of completionIds) {
        const states = await Promise.all(this.#queues.map((queue) => queue.getJobState(id)));
        if (states.some((state) => QUEUED_OR_RUNNING.has(state))) live.add(id);
      }
      return live;
    })().catch(() => null);
    try {
      return await Promise.race([asked, silent]);
    } finally {
      clearTimeout(timer);
    }
  }

  async close(): Promise<void> {
    await Promise.all(this.#queues.map((queue) => queue.close().catch(() => undefined)));
  }
}
