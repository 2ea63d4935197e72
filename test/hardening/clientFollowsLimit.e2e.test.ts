import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { gatedEngine } from "../inference/gatedEngine.ts";
import { SseReader } from "../inference/sseReader.ts";
import { eventually } from "../support/eventually.ts";
import { startTestPlatform, TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";

/**
 * Reads that follow a running completion live (GET ?stream=true, each with a Redis connection of its
 * own) are bounded per account and API process (CLIENT_FOLLOWS_PER_ACCOUNT): one more is a 429, another
 * account is not affected, and a closed read frees its place.
 */
describe("open follows of stored completions, per account", () => {
  let platform: TestPlatform;
  const gate = { allowed: 1 };

  beforeAll(async () => {
    platform = await startTestPlatform({
      wrapEngine: (_model, engine) => gatedEngine(engine, gate),
      env: { CLIENT_FOLLOWS_PER_ACCOUNT: "2", DELTA_COALESCE_MS: "0" },
    });
  }, 60_000);
  afterAll(async () => {
    gate.allowed = Number.POSITIVE_INFINITY;
    await platform?.close();
  });

  /** A streamed chat held after its first delta; its completion id. */
  async function runningCompletion(key: string): Promise<{ id: string; reader: SseReader }> {
    const answer = await fetch(`${platform.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: TINY_CHAT, messages: [{ role: "user", content: "Hello" }], max_tokens: 20, stream: true }),
    });
    expect(answer.status).toBe(200);
    const reader = new SseReader(answer);
    await eventually(async () => ((await reader.next())?.data?.includes('"content"') ? true : undefined), 10_000);
    return { id: answer.headers.get("x-completion-id")!, reader };
  }
  const follow = (key: string, id: string, signal?: AbortSignal) =>
    fetch(`${platform.baseUrl}/v1/chat/completions/${id}?stream=true`, { headers: { authorization: `Bearer ${key}` }, ...(signal ? { signal } : {}) });

  it("answers the third open follow of an account 429 too_many_open_streams; another account's follows and a freed place are served", async () => {
    const key = (await platform.createKey()).key;
    const { id } = await runningCompletion(key);
    const first = new AbortController();
    expect((await follow(key, id, first.signal)).status).toBe(200);
    expect((await follow(key, id)).status).toBe(200);
    const listening = await platform.inference.records.listeners(id);
    const refused = await follow(key, id);
    expect(refused.status).toBe(429);
    // A refused follow counts no listener (the abandonment watch would never stop the job otherwise).
    expect(await platform.inference.records.listeners(id)).toBe(listening);
    expect(refused.headers.get("retry-after")).toBe("1");
    expect(((await refused.json()) as { error: { code: string; type: string } }).error).toMatchObject({
      code: "too_many_open_streams",
      type: "rate_limit_exceeded",
    });

    const otherKey = (await platform.createKey()).key;
    const other = await runningCompletion(otherKey);
    expect((await follow(otherKey, other.id)).status).toBe(200);

    first.abort();
    const again = await eventually(async () => {
      const answer = await follow(key, id);
      if (answer.status === 200) return answer;
      await answer.body?.cancel();
      return undefined;
    }, 5_000);
    expect(again.status).toBe(200);
  }, 60_000);
});
