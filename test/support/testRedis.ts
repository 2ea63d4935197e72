import { randomBytes } from "node:crypto";
import { createRedis, type Redis } from "../../src/redis/createRedis.ts";
import { deleteKeysByPrefix } from "../../src/redis/deleteKeysByPrefix.ts";

export const TEST_REDIS_URL = process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379";

export type TestRedis = { redis: Redis; prefix: string; close(): Promise<void> };

/** A Redis connection (fail-fast, like the API's) and a key prefix unique to one test file; close() deletes the prefix's keys. */
export async function createTestRedis(url: string = TEST_REDIS_URL): Promise<TestRedis> {
  const prefix = `test-${randomBytes(5).toString("hex")}`;
  const redis = createRedis(url, { kind: "fail-fast" });
  return {
    redis,
    prefix,
    async close() {
      await deleteKeysByPrefix(redis, prefix).finally(() => redis.disconnect());
    },
  };
}
