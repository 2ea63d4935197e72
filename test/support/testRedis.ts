import { randomBytes } from "node:crypto";
import { createRedis, type Redis } from "../../src/redis/createRedis.ts";
import { deleteKeysByPrefix } from "../../src/redis/deleteKeysByPrefix.ts";
import type { RedisTarget } from "../../src/redis/redisTarget.ts";

export const TEST_REDIS_URL = process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379";

export type TestRedis = { redis: Redis; prefix: string; target: RedisTarget | string; close(): Promise<void> };

/** A Redis connection (fail-fast, like the API's) and a key prefix unique to one test file; close() deletes the prefix's keys. */
export async function createTestRedis(target: RedisTarget | string = TEST_REDIS_URL): Promise<TestRedis> {
  const prefix = `test-${randomBytes(5).toString("hex")}`;
  const redis = createRedis(target, { kind: "fail-fast" });
  return {
    redis,
    prefix,
    target,
    async close() {
      await deleteKeysByPrefix(redis, prefix).finally(() => redis.disconnect());
    },
  };
}

/** The environment variables (src/config) that name `target`. */
export function redisTargetEnv(target: RedisTarget | string): Record<string, string> {
  if (typeof target === "string") return { REDIS_URL: target };
  if (target.mode === "single") return { REDIS_URL: target.url };
  if (target.mode === "cluster") return { REDIS_CLUSTER_NODES: target.nodes.map((n) => `${n.host}:${n.port}`).join(",") };
  return { REDIS_SENTINELS: target.sentinels.map((n) => `${n.host}:${n.port}`).join(","), REDIS_SENTINEL_NAME: target.name };
}
