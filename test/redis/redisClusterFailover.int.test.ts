import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRedis, type Redis } from "../../src/redis/createRedis.ts";
import { startRedisCluster, type RedisCluster } from "../support/redisCluster.ts";

/**
 * A worker's connection to a Redis Cluster whose master dies (kill -9) while it writes: its replica takes
 * over after the node timeout, and every write issued meanwhile waits for it and lands there, as a
 * worker's writes wait for one server to come back. They failed ("Too many Cluster redirections": ioredis
 * gives a command 16 tries 100 ms apart, less than a failover takes), so about 40% of the streams running
 * at a failover lost the middle of their replies.
 */
const KEY = "{cluster-failover-test}:replay";
const NODE_TIMEOUT_MS = 2_000;

let cluster: RedisCluster;
let worker: Redis;

beforeAll(async () => {
  cluster = await startRedisCluster(3, { replicas: 1, nodeTimeoutMs: NODE_TIMEOUT_MS });
  worker = createRedis(cluster.target, { kind: "worker" });
}, 90_000);

afterAll(async () => {
  worker?.disconnect();
  await cluster?.stop();
}, 30_000);

describe("a worker's connection to a Redis Cluster whose master fails over", () => {
  it("waits for the replica to take over: no write fails, and every write issued after the kill is there", async () => {
    await worker.del(KEY);
    // Each write's failure, or null.
    const writes: Promise<string | null>[] = [];
    let n = 0;
    const write = () =>
      writes.push(
        worker.xadd(KEY, "*", "n", String(n++)).then(
          () => null,
          (error: unknown) => String(error),
        ),
      );
    for (let i = 0; i < 10; i++) {
      write();
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    await Promise.all(writes);
    await cluster.killMasterOf(KEY);
    const firstAfterKill = n;
    // Writes every 25 ms through the failover (about the node timeout and an election), and a little after.
    const until = Date.now() + NODE_TIMEOUT_MS * 3;
    while (Date.now() < until) {
      write();
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    const failed = (await Promise.all(writes)).filter((failure) => failure !== null);
    expect(failed.slice(0, 3)).toEqual([]);
    const written = new Set((await worker.xrange(KEY, "-", "+")).map(([, fields]) => Number(fields[1])));
    const missing = Array.from({ length: n - firstAfterKill }, (_, i) => firstAfterKill + i).filter((k) => !written.has(k));
    expect(missing).toEqual([]);
  }, 60_000);
});
