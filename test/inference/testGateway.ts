import { AbandonmentWatch } from "../../src/api/inference/jobs/abandonmentWatch.ts";
import { CompletionQueues } from "../../src/api/inference/jobs/completionQueues.ts";
import { ApiPresence } from "../../src/contracts/apiPresence.ts";
import { FollowedRecords } from "../../src/api/inference/jobs/followedRecords.ts";
import { CompletionRecords } from "../../src/api/inference/jobs/completionRecords.ts";
import { DeltaSubscriber } from "../../src/api/inference/jobs/deltaSubscriber.ts";
import { InferenceGateway } from "../../src/api/inference/jobs/inferenceGateway.ts";
import type { UndeliveredNotes } from "../../src/api/inference/jobs/undeliveredReplyNotes.ts";
import { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import { TenantCounters } from "../../src/contracts/tenantCounters.ts";
import { WorkerPresence } from "../../src/contracts/workerPresence.ts";
import { silentLogger } from "../../src/observability/logger.ts";
import type { TestRedis } from "../support/testRedis.ts";

/** An API process's InferenceGateway on a test's Redis (real BullMQ), with what a test reads and closes of it. */
export type TestGateway = { keys: InferenceKeys; queues: CompletionQueues; subscriber: DeltaSubscriber; gateway: InferenceGateway; close(): Promise<void> };

/** The gateway as the API builds it, and a live worker announced for `model` that takes nothing (its jobs stay in line). */
export async function startTestGateway(
  redis: TestRedis,
  model: string,
  options: { jobIdleTimeoutMs: number; sharedReadMs?: number; undelivered?: UndeliveredNotes },
): Promise<TestGateway> {
  const keys = new InferenceKeys(redis.prefix);
  const queues = new CompletionQueues(redis.redis, keys);
  const subscriber = new DeltaSubscriber(redis.redis, keys);
  const apiPresence = new ApiPresence(redis.redis, keys);
  await apiPresence.beat(subscriber.replyTo, 600_000);
  const records = new CompletionRecords(redis.redis, keys, 3600, { process: subscriber.replyTo, presence: apiPresence });
  const counters = new TenantCounters(redis.redis, redis.prefix);
  const abandonment = new AbandonmentWatch({ records, queues, graceMs: 60_000, lastMessage: (id) => records.lastMessage(id), logger: silentLogger });
  const gateway = new InferenceGateway({
    presence: new WorkerPresence(redis.redis, keys),
    queues,
    subscriber,
    records,
    followed: new FollowedRecords(),
    abandonment,
    ...(options.undelivered ? { undelivered: options.undelivered } : {}),
    limits: { jobIdleTimeoutMs: options.jobIdleTimeoutMs, queueMaxWaiting: 1000 },
    aheadOf: (job) => counters.ahead(job),
    ...(options.sharedReadMs === undefined ? {} : { sharedReadMs: options.sharedReadMs }),
  });
  await redis.redis.zadd(keys.modelWorkers(model), Date.now() + 600_000, "test-presence");
  return {
    keys,
    queues,
    subscriber,
    gateway,
    async close() {
      await subscriber.close();
      await queues.close();
    },
  };
}
