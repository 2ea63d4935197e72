import { afterAll, describe, expect, it } from "vitest";
import { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import { silentLogger } from "../../src/observability/logger.ts";
import { createRedis, type Redis } from "../../src/redis/createRedis.ts";
import { CompletionWorker } from "../../workers/completion/completionWorker.ts";
import { type RedisServer, startRedisServer } from "../support/redisServer.ts";
import { startTestPlatform, type TestPlatform } from "../support/testPlatform.ts";

/**
 * A worker's close, and the worker role's stop, while Redis is away or was restarted a moment before.
 * BullMQ's close disconnects the worker's blocking connection and waits for it to end, and an ioredis
 * client told to disconnect while it waits to reconnect never ends (boundedCloseBackend.ts); the role's
 * leave waited for Redis to come back. Each case has a private redis-server, killed by its PID.
 */
const ENDED_WITHIN_MS = 15_000;

const servers: RedisServer[] = [];
const connections: Redis[] = [];
const platforms: TestPlatform[] = [];
afterAll(async () => {
  for (const connection of connections) connection.disconnect();
  await Promise.all(servers.map((server) => server.start()));
  await Promise.all(platforms.map((platform) => platform.close()));
  await Promise.all(servers.map((server) => server.stop()));
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function privateRedis(): Promise<RedisServer> {
  const server = await startRedisServer();
  servers.push(server);
  return server;
}

/** An idle worker of 2 slots, its fetch loop blocked on its connection waiting for a job. */
async function idleWorker(server: RedisServer): Promise<CompletionWorker> {
  const connection = createRedis(server.url, { kind: "worker" });
  connection.on("error", () => undefined);
  connections.push(connection);
  const runner = { run: async () => null };
  const worker = new CompletionWorker({ modelId: "m", redis: connection, keys: new InferenceKeys("close-test"), concurrency: 2, runner, logger: silentLogger });
  await worker.start();
  await sleep(200);
  return worker;
}

/** How long `ending` took, or null when it had not ended after ENDED_WITHIN_MS. */
async function timeToEnd(ending: () => Promise<void>): Promise<number | null> {
  const started = performance.now();
  let timer: NodeJS.Timeout | undefined;
  const gaveUp = new Promise<null>((resolve) => {
    timer = setTimeout(() => resolve(null), ENDED_WITHIN_MS);
  });
  try {
    return await Promise.race([ending().then(() => performance.now() - started), gaveUp]);
  } finally {
    clearTimeout(timer);
  }
}

/** Redis killed, then after `awayMs` either left away or started again (and `afterMs` later). */
async function outage(server: RedisServer, awayMs: number, back: { afterMs: number } | null): Promise<void> {
  await server.stop();
  await sleep(awayMs);
  if (!back) return;
  await server.start();
  await sleep(back.afterMs);
}

describe("a worker closed while Redis is away or just back", () => {
  it("closes when closed right after a restarted Redis answers again (its connections still waiting to reconnect)", async () => {
    const cases = [0, 50].map(async (afterMs) => {
      const server = await privateRedis();
      const worker = await idleWorker(server);
      await outage(server, 300, { afterMs });
      return { afterMs, ms: await timeToEnd(() => worker.close()) };
    });
    for (const { afterMs, ms } of await Promise.all(cases)) expect(ms, `closed ${afterMs} ms after Redis was back`).not.toBeNull();
  }, 60_000);

  it("closes while Redis is still away", async () => {
    const cases = [0, 1_500].map(async (awayMs) => {
      const server = await privateRedis();
      const worker = await idleWorker(server);
      await outage(server, awayMs, null);
      return { awayMs, ms: await timeToEnd(() => worker.close()) };
    });
    for (const { awayMs, ms } of await Promise.all(cases)) expect(ms, `closed ${awayMs} ms after Redis went away`).not.toBeNull();
  }, 60_000);

  it("closes at once while Redis answers", async () => {
    const worker = await idleWorker(await privateRedis());
    const ms = await timeToEnd(() => worker.close());
    expect(ms).not.toBeNull();
    expect(ms!).toBeLessThan(1_000);
  });
});

describe("the worker role stopped while Redis is away or just back", () => {
  it("stops (its leave waits for Redis at most a second; the presence expires anyway)", async () => {
    const cases = [null, { afterMs: 0 }].map(async (back) => {
      const server = await privateRedis();
      const platform = await startTestPlatform({ redisUrl: server.url });
      platforms.push(platform);
      await sleep(200);
      await outage(server, 300, back);
      return { back, ms: await timeToEnd(() => platform.stopWorker()) };
    });
    for (const { back, ms } of await Promise.all(cases)) expect(ms, back ? "stopped just after Redis was back" : "stopped with Redis away").not.toBeNull();
  }, 60_000);
});
