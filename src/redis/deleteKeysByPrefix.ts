import type { Redis } from "./createRedis.ts";

/** Deletes every key starting with `prefix` (SCAN, never KEYS): cleanup of a test or bench namespace. */
export async function deleteKeysByPrefix(redis: Redis, prefix: string): Promise<void> {
  let cursor = "0";
  do {
    const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}*`, "COUNT", 500);
    cursor = next;
    if (keys.length) await redis.del(...keys);
  } while (cursor !== "0");
}
