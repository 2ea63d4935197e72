import { randomBytes } from "node:crypto";
import { createRedis, type Redis } from "../../src/redis/createRedis.ts";
import { deleteKeysByPrefix } from "../../src/redis/deleteKeysByPrefix.ts";

export const TEST_REDIS_URL = process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379";

export type TestRedis = { redis: Redis; prefix: string; close(): Promise<void> };

/** A Redis connection and a key prefix unique to one test file; close() deletes the prefix's keys. */
export async function createTestRedis(): Promise<TestRedis> {
  const prefix = `test-${randomBytes(5).toString("hex")}`;
  const redis = createRedis(TEST_REDIS_URL);
  return {
    redis,
    prefix,
    async close() {
      await deleteKeysByPrefix(redis, prefix);
      redis.disconnect();
    },
  };
}
