import { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import type { Redis } from "../../src/redis/createRedis.ts";

/** How many completion records Redis holds under a prefix (SCAN, never KEYS): one per request the API admitted. */
export async function completionRecordCount(redis: Redis, prefix: string): Promise<number> {
  const pattern = new InferenceKeys(prefix).completionRecord("*");
  let count = 0;
  let cursor = "0";
  do {
    const [next, found] = await redis.scan(cursor, "MATCH", pattern, "COUNT", 1000);
    cursor = next;
    count += found.length;
  } while (cursor !== "0");
  return count;
}
