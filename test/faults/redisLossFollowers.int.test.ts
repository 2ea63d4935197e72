import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RedisServer, startRedisServer } from "../support/redisServer.ts";
import { startTestPlatform, TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";
import { gatedEngine } from "../inference/gatedEngine.ts";
import { SseReader } from "../inference/sseReader.ts";

/**
 * Requests that follow a completion from its replay stream (a GET of a running completion, streamed or
 * not, a resume with Last-Event-ID) while the private redis-server is killed (SIGKILL, by its PID): each
 * ends within a few seconds with redis_unavailable, as the POST that started it does, instead of waiting
 * for Redis to come back. The engine is held after two deltas, so the completion is running throughout.
 */
let redis: RedisServer;
let platform: TestPlatform;
let key: string;
const gate = { allowed: 2 };

beforeAll(async () => {
  redis = await startRedisServer();
  platform = await startTestPlatform({
    redisUrl: redis.url,
    wrapEngine: (_model, engine) => gatedEngine(engine, gate),
    env: { DELTA_COALESCE_MS: "0", JOB_IDLE_TIMEOUT_MS: "120000" },
  });
  key = (await platform.createKey()).key;
}, 60_000);
afterAll(async () => {
  gate.allowed = Number.POSITIVE_INFINITY;
  await redis?.start();
  await platform?.close();
  await redis?.stop();
});

/** Milliseconds until `ended` settles, at most `limitMs` (then the limit: it had not ended). */
async function msUntil(ended: Promise<unknown>, limitMs: number): Promise<number> {
  const started = Date.now();
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([ended.catch(() => undefined), new Promise((resolve) => (timer = setTimeout(resolve, limitMs)))]);
  clearTimeout(timer);
  return Date.now() - started;
}

describe("followers of a running completion when Redis is lost", () => {
  it("a streamed GET, a resume and a plain GET each end within 5 s with redis_unavailable", async () => {
    const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" };
    const post = await fetch(`${platform.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers,
      // Greedy: a sampled reply may end by itself within the two deltas the gate lets through.
      body: JSON.stringify({ model: TINY_CHAT, messages: [{ role: "user", content: "Tell me a story" }], max_tokens: 30, temperature: 0, stream: true }),
    });
    expect(post.status).toBe(200);
    const id = post.headers.get("x-completion-id")!;
    const original = new SseReader(post);
    let lastId = "";
    for (let deltas = 0; deltas < 2; ) {
      const item = await original.next();
      if (item?.id) lastId = item.id;
      if (item?.data?.includes('"content"')) deltas++;
    }
    const streamed = new SseReader(await fetch(`${platform.baseUrl}/v1/chat/completions/${id}?stream=true`, { headers }));
    const resumed = new SseReader(
      await fetch(`${platform.baseUrl}/v1/chat/completions/${id}?stream=true`, { headers: { ...headers, "last-event-id": lastId } }),
    );
    const plain = fetch(`${platform.baseUrl}/v1/chat/completions/${id}`, { headers });
    // Every follower is reading (blocked on its replay stream) before Redis goes.
    await new Promise((resolve) => setTimeout(resolve, 500));

    await redis.stop();
    const streamedText = streamed.rest();
    const resumedText = resumed.rest();
    const [streamedMs, resumedMs, plainMs] = await Promise.all([msUntil(streamedText, 10_000), msUntil(resumedText, 10_000), msUntil(plain, 10_000)]);
    expect({ streamedMs, resumedMs, plainMs }).toEqual({ streamedMs: expect.any(Number), resumedMs: expect.any(Number), plainMs: expect.any(Number) });
    expect(Math.max(streamedMs, resumedMs, plainMs)).toBeLessThan(5_000);
    for (const items of [await streamedText, await resumedText]) {
      expect(items.some((item) => item.data?.includes("redis_unavailable"))).toBe(true);
    }
    const answer = await plain;
    expect(answer.status).toBe(503);
    expect(((await answer.json()) as { error: { code: string } }).error.code).toBe("redis_unavailable");
  }, 60_000);
});
