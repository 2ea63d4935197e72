import { Redis as IORedis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RedisServer, startRedisServer } from "../support/redisServer.ts";
import { startTestPlatform, TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";

/**
 * A job's place among its account's requests in progress (and the tokens it did not use) is given back
 * before its last message goes out: a client that sends its next request as soon as it has the answer
 * finds its place free. It came back a moment after the answer, and a client at `concurrent_requests`
 * sending one request at a time got 429 `concurrency` now and then. Watched on a private Redis with
 * MONITOR: the release script of the job runs before the append of its last message.
 */
describe("a job's end in its account's counters", () => {
  let redis: RedisServer;
  let monitor: IORedis;
  let platform: TestPlatform;
  let key: string;
  const commands: string[][] = [];

  beforeAll(async () => {
    redis = await startRedisServer();
    await redis.start();
    platform = await startTestPlatform({ redisUrl: redis.url, env: { DELTA_COALESCE_MS: "0" } });
    key = (await platform.createKey()).key;
    const client = new IORedis(redis.url).on("error", () => undefined);
    monitor = (await client.monitor()).on("error", () => undefined);
    client.disconnect();
    monitor.on("monitor", (_time: string, args: string[]) => commands.push(args));
  }, 60_000);
  afterAll(async () => {
    monitor?.disconnect();
    await platform?.close();
    await redis?.stop();
  });

  for (const stream of [false, true]) {
    it(`is left before the last message is appended (${stream ? "a stream" : "a whole answer"})`, async () => {
      const response = await fetch(`${platform.baseUrl}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: TINY_CHAT, messages: [{ role: "user", content: "Hi" }], max_tokens: 5, stream }),
      });
      expect(response.status).toBe(200);
      const id = response.headers.get("x-completion-id")!;
      await response.text();
      await new Promise((resolve) => setTimeout(resolve, 500));
      // The release script (six keys) names the job; the last message is the `usage` one appended to its replay stream.
      const release = commands.findIndex((args) => /^evalsha$|^eval$/i.test(args[0]!) && args[2] === "6" && args.includes(id));
      const last = commands.findIndex(
        (args) => /^xadd$/i.test(args[0]!) && args[1]!.endsWith(`:replay:${id}`) && args.some((a) => a.includes('"type":"usage"')),
      );
      expect(release).toBeGreaterThanOrEqual(0);
      expect(last).toBeGreaterThanOrEqual(0);
      expect(release).toBeLessThan(last);
    }, 60_000);
  }
});
