import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SseReader } from "../inference/sseReader.ts";
import { startTestPlatform, TINY_CHAT, TINY_EMBED, type TestPlatform } from "../support/testPlatform.ts";

const RATE_HEADERS = ["limit", "remaining", "reset"].flatMap((name) => [`x-ratelimit-${name}-requests`, `x-ratelimit-${name}-tokens`]);

/** OpenAI's x-ratelimit-* headers on every inference endpoint, streamed or not (embedded tiny models, a real worker). */
describe("rate-limit headers on every inference answer", () => {
  let platform: TestPlatform;
  let key: string;
  beforeAll(async () => {
    platform = await startTestPlatform({ env: { RATE_LIMIT_KEY_REQUESTS_PER_MINUTE: "1000" } });
    key = (await platform.createKey()).key;
  });
  afterAll(async () => {
    await platform?.close();
  });

  const post = (path: string, body: unknown) =>
    fetch(`${platform.baseUrl}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });

  it("chat, streamed chat, completions and embeddings carry all six, counting down", async () => {
    const answers = [
      await post("/v1/chat/completions", { model: TINY_CHAT, messages: [{ role: "user", content: "Hi" }], max_tokens: 4 }),
      await post("/v1/chat/completions", { model: TINY_CHAT, messages: [{ role: "user", content: "Hi" }], max_tokens: 4, stream: true }),
      await post("/v1/completions", { model: TINY_CHAT, prompt: "Hi", max_tokens: 4 }),
      await post("/v1/embeddings", { model: TINY_EMBED, input: "Hi" }),
    ];
    const remaining: number[] = [];
    for (const answer of answers) {
      expect(answer.status).toBe(200);
      for (const name of RATE_HEADERS) expect(answer.headers.get(name), name).not.toBeNull();
      expect(answer.headers.get("x-ratelimit-limit-requests")).toBe("1000");
      expect(answer.headers.get("x-ratelimit-reset-requests")).toMatch(/^(\d+ms|(\d+m)?\d+(\.\d+)?s)$/);
      remaining.push(Number(answer.headers.get("x-ratelimit-remaining-requests")));
      await answer.text();
    }
    expect(remaining).toEqual([999, 998, 997, 996]);
  });
});

/** The stream's `: queued position=N` counts the jobs a worker takes before this one (lanes, fair share). */
describe("queue position by the scheduling", () => {
  let platform: TestPlatform;
  beforeAll(async () => {
    platform = await startTestPlatform({ startWorker: false, env: { SSE_KEEPALIVE_MS: "200", JOB_START_TIMEOUT_STREAM_MS: "5000" } });
    // A worker beats presence for the model but is not consuming: the queue only fills.
    await platform.deps.redis.zadd(`${platform.deps.config.redisPrefix}:workers:${TINY_CHAT}`, Date.now() + 600_000, "test-presence");
  });
  afterAll(async () => {
    await platform?.close();
  });

  const stream = (key: string, signal: AbortSignal) =>
    fetch(`${platform.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: TINY_CHAT, messages: [{ role: "user", content: "Hi" }], stream: true, max_tokens: 4 }),
      signal,
    });

  async function position(key: string, signal: AbortSignal): Promise<string | undefined> {
    const reader = new SseReader(await stream(key, signal));
    for (let item = await reader.next(); item; item = await reader.next()) if (item.comment?.startsWith("queued")) return item.comment;
    return undefined;
  }

  it("puts another account's first request right behind the first of an account with three waiting", async () => {
    const heavy = (await platform.createKey()).key;
    const light = (await platform.createKey()).key;
    const stop = new AbortController();
    try {
      expect(await position(heavy, stop.signal)).toBe("queued position=1");
      expect(await position(heavy, stop.signal)).toBe("queued position=2");
      expect(await position(heavy, stop.signal)).toBe("queued position=3");
      // In one FIFO line it would be 4th; its first job ranks with the heavy account's first.
      expect(await position(light, stop.signal)).toBe("queued position=2");
    } finally {
      stop.abort();
    }
  });
});

/** The `: queued` comment adds the expected wait once this API process has seen jobs of the model wait and start. */
describe("expected wait in the queued comment", () => {
  let platform: TestPlatform;
  beforeAll(async () => {
    platform = await startTestPlatform({ startWorker: false, env: { SSE_KEEPALIVE_MS: "200", JOB_START_TIMEOUT_STREAM_MS: "20000" } });
    await platform.deps.redis.zadd(`${platform.deps.config.redisPrefix}:workers:${TINY_CHAT}`, Date.now() + 600_000, "test-presence");
  });
  afterAll(async () => {
    await platform?.close();
  });

  const queuedComment = async (key: string): Promise<{ comment: string; reader: SseReader }> => {
    const reader = new SseReader(
      await fetch(`${platform.baseUrl}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: TINY_CHAT, messages: [{ role: "user", content: "Hi" }], stream: true, max_tokens: 4 }),
      }),
    );
    for (let item = await reader.next(); item; item = await reader.next()) if (item.comment?.startsWith("queued")) return { comment: item.comment, reader };
    throw new Error("no queued comment");
  };
  const drain = async (reader: SseReader) => {
    for (let item = await reader.next(); item; item = await reader.next()) if (item.data === "[DONE]") return;
  };

  it("is absent before any job was seen, then estimates from how long the earlier ones waited per place", async () => {
    const { key } = await platform.createKey();
    const first = await queuedComment(key);
    const second = await queuedComment(key);
    expect(first.comment).toBe("queued position=1");
    expect(second.comment).toBe("queued position=2");
    // They wait in line about 600 ms (no worker consumes yet), then a worker takes them.
    await new Promise((resolve) => setTimeout(resolve, 600));
    await platform.startWorker();
    await Promise.all([drain(first.reader), drain(second.reader)]);
    const next = await queuedComment(key);
    const match = /^queued position=(\d+) wait_ms=(\d+)$/.exec(next.comment);
    expect(match, next.comment).not.toBeNull();
    // At least a few hundred ms per place, as the earlier ones waited (bounded above by the test's own pace).
    expect(Number(match![2]) / Number(match![1])).toBeGreaterThan(200);
    expect(Number(match![2]) / Number(match![1])).toBeLessThan(20_000);
    await drain(next.reader);
  });
});
