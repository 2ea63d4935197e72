import { isCluster, type Redis } from "./createRedis.ts";

/**
 * Deletes every key starting with `prefix` (SCAN, never KEYS): cleanup of a test or bench namespace. In
 * a Redis Cluster, SCAN sees one node's keys only, so every master is scanned, and keys are deleted one
 * per command (the keys of one node lie on many slots; a multi-key DEL would be refused).
 */
export async function deleteKeysByPrefix(redis: Redis, prefix: string): Promise<void> {
  if (!isCluster(redis)) {
    await scanAndDelete(redis, prefix, (keys) => redis.del(...keys));
    return;
  }
  for (const master of redis.nodes("master")) {
    await scanAndDelete(master, prefix, (keys) => Promise.all(keys.map((key) => master.del(key))));
  }
}

async function scanAndDelete(node: Redis, prefix: string, remove: (keys: string[]) => Promise<unknown>): Promise<void> {
  let cursor = "0";
  do {
    const [next, keys] = await node.scan(cursor, "MATCH", `${prefix}*`, "COUNT", 500);
    cursor = next;
    if (keys.length) await remove(keys);
  } while (cursor !== "0");
}
