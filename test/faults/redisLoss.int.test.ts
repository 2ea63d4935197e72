import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SseReader } from "../inference/sseReader.ts";
import { type RedisServer, startRedisServer } from "../support/redisServer.ts";
import { startTestPlatform, TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";

/**
 * A Redis without persistence restarts while a stream waits in line: Redis comes back empty, and the API
 * submits the job again (same job id), so the connected client gets its answer once a worker is there.
 */
let redis: RedisServer;
let platform: TestPlatform;
let key: string;

beforeAll(async () => {
  redis = await startRedisServer();
  platform = await startTestPlatform({ redisUrl: redis.url, startWorker: false, env: { JOB_START_TIMEOUT_STREAM_MS: "60000" } });
  key = (await platform.createKey()).key;
});
afterAll(async () => {
  await redis?.start();
  await platform?.close();
  await redis?.stop();
});

/** A worker heartbeat for the model without a worker: the request is accepted and waits in line. */
const pretendWorker = () => platform.deps.redis.zadd(`${platform.deps.config.redisPrefix}:workers:${TINY_CHAT}`, Date.now() + 600_000, "test-presence");

describe("Redis restarted empty while a request waits in line", () => {
  it("the waiting request's job is submitted again and answered once a worker runs", async () => {
    await pretendWorker();
    const response = await fetch(`${platform.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: TINY_CHAT, messages: [{ role: "user", content: "Hi" }], temperature: 0, stream: true }),
    });
    expect(response.status).toBe(200);
    const reader = new SseReader(response);
    expect((await reader.next())?.retry).toBeDefined();

    await redis.stop();
    await redis.start();
    // Empty now: the queue, the record and the heartbeat are gone. The API re-submits on reconnecting.
    const keys = async () => (await platform.deps.redis.keys(`${platform.deps.config.redisPrefix}*`).catch(() => [])).length;
    for (let i = 0; i < 100 && (await keys()) === 0; i++) await new Promise((r) => setTimeout(r, 100));
    expect(await keys()).toBeGreaterThan(0);

    await platform.startWorker();
    const rest = await reader.rest();
    expect(rest.at(-1)?.data).toBe("[DONE]");
    const chunks = rest.filter((i) => i.data !== undefined && i.data !== "[DONE]").map((i) => JSON.parse(i.data!));
    expect(chunks.filter((c) => c.error !== undefined)).toEqual([]);
    expect(chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("")).toBe(platform.tiny.greedyReply);
  }, 60_000);
});
