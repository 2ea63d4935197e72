import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../support/eventually.ts";
import { type RedisServer, startRedisServer } from "../support/redisServer.ts";
import { startTestPlatform, TINY_CHAT, TINY_EMBED, type TestPlatform } from "../support/testPlatform.ts";
import { openHolds } from "../usage/usageFixtures.ts";

/**
 * The platform's private redis-server is frozen (SIGSTOP, by its PID) for a few seconds while requests
 * arrive, then goes on (SIGCONT) and runs what it was sent meanwhile. The requests were answered 503
 * already; none of them may stay counted in flight afterwards (an account with a limit of 3 requests at
 * once would otherwise be refused for the in-flight TTL, 30 minutes), run, or be charged.
 */
let redis: RedisServer;
let platform: TestPlatform;

beforeAll(async () => {
  redis = await startRedisServer();
  platform = await startTestPlatform({ redisUrl: redis.url, env: { RATE_LIMIT_CONCURRENT_REQUESTS: "3" } });
});
afterAll(async () => {
  redis?.resume();
  await platform?.close();
  await redis?.stop();
});

describe("a Redis stall", () => {
  it("answers a request with a key not yet cached 503 redis_unavailable within about two command timeouts (its key check's, its admission's)", async () => {
    const { key } = await platform.createKey();
    redis.pause();
    try {
      const started = performance.now();
      const answer = await platform.request("POST", "/v1/chat/completions", {
        token: key,
        body: { model: TINY_CHAT, messages: [{ role: "user", content: "Hello" }], max_tokens: 3 },
      });
      const ms = performance.now() - started;
      expect(answer.status).toBe(503);
      expect(answer.body.error.code).toBe("redis_unavailable");
      // REDIS_COMMAND_TIMEOUT_MS is 1 s: the key check's two reads run together (one after the other: 3 s).
      expect(ms).toBeGreaterThan(1_900);
      expect(ms).toBeLessThan(2_800);
    } finally {
      redis.resume();
    }
  }, 30_000);

  it("leaves no request it refused counted in flight, queued, charged or holding its Idempotency-Key once Redis answers again", async () => {
    const { key, account } = await platform.createKey();
    const request = (path: string, body: unknown) => platform.request("POST", path, { token: key, body });
    const chat = (stream: boolean) =>
      request("/v1/chat/completions", { model: TINY_CHAT, messages: [{ role: "user", content: "Hello" }], max_tokens: 3, stream });
    expect((await chat(false)).status).toBe(200);

    redis.pause();
    let answers: { status: number; completionId: string | null }[];
    try {
      const stalled = await Promise.all([
        platform.request("POST", "/v1/chat/completions", {
          token: key,
          headers: { "idempotency-key": "stalled-retry-1" },
          body: { model: TINY_CHAT, messages: [{ role: "user", content: "Hello" }], max_tokens: 3 },
        }),
        chat(false),
        chat(true),
        request("/v1/completions", { model: TINY_CHAT, prompt: "Hi", max_tokens: 3 }),
        request("/v1/embeddings", { model: TINY_EMBED, input: "Hi" }),
      ]);
      answers = stalled.map((answer) => ({ status: answer.status, completionId: answer.headers.get("x-completion-id") }));
    } finally {
      redis.resume();
    }
    for (const answer of answers) expect(answer.status).toBe(503);

    // Three requests at once fit the account's limit of 3 again: nothing of the stall is counted.
    const fits = await eventually(async () => {
      const burst = await Promise.all([chat(false), chat(true), chat(false)]);
      return burst.every((answer) => answer.status === 200) ? burst : undefined;
    }, 15_000);
    expect(fits).toHaveLength(3);
    // The SDK's retry of the request with an Idempotency-Key (same key, same body) runs now, at once: the
    // key was not left claimed for a completion that never was.
    const retried = await platform.request("POST", "/v1/chat/completions", {
      token: key,
      headers: { "idempotency-key": "stalled-retry-1" },
      body: { model: TINY_CHAT, messages: [{ role: "user", content: "Hello" }], max_tokens: 3 },
    });
    expect(retried.status, retried.text).toBe(200);
    // A refused request names no completion; nothing refused ran or was charged: the account's usages
    // are the five answered chats'; no hold stays open.
    for (const answer of answers) expect(answer.completionId).toBeNull();
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const usages = await platform.deps.pool.query<{ n: string }>(
      "SELECT count(*) AS n FROM es_events WHERE event_type = 'UsageRecorded' AND data->>'accountId' = $1",
      [account.accountId],
    );
    expect(Number(usages.rows[0]!.n)).toBe(5);
    expect(await openHolds(platform.deps.pool, account.accountId)).toBe(0);
  }, 60_000);
});
