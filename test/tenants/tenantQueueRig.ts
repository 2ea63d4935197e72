import { afterAll, beforeAll } from "vitest";
import { CompletionQueues } from "../../src/api/inference/jobs/completionQueues.ts";
import { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import { TenantCounters } from "../../src/contracts/tenantCounters.ts";
import { createRedis, type Redis } from "../../src/redis/createRedis.ts";
import { createTestRedis, TEST_REDIS_URL, type TestRedis } from "../support/testRedis.ts";

/** What the tenant-queue tests run on: a Redis prefix of their own, its queues and tenant counters, and a worker's connection. */
export type TenantQueueRig = { redis: TestRedis; workerRedis: Redis; keys: InferenceKeys; queues: CompletionQueues; counters: TenantCounters };

/** Sets the rig up before the file's tests and closes it after them; its fields are there once the tests run. */
export function useTenantQueueRig(): TenantQueueRig {
  const rig = {} as TenantQueueRig;
  beforeAll(async () => {
    rig.redis = await createTestRedis();
    rig.keys = new InferenceKeys(rig.redis.prefix);
    rig.queues = new CompletionQueues(rig.redis.redis, rig.keys);
    rig.workerRedis = createRedis(TEST_REDIS_URL, { kind: "worker" });
    rig.counters = new TenantCounters(rig.redis.redis, rig.redis.prefix);
  });
  afterAll(async () => {
    await rig.queues?.close();
    rig.workerRedis?.disconnect();
    await rig.redis?.close();
  });
  return rig;
}
