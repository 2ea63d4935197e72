import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { TestApp } from "../support/testApp.ts";
import { startSecondApi, startTestPlatform, TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";
import { completionEvents, parseSse } from "./inferenceSteps.ts";
import { pacedEngine } from "./pacedEngine.ts";

/**
 * A whole answer's retry with its Idempotency-Key that reaches another API process while the first
 * request still runs attaches to it; when the first one's process, about to stop, stops it uncharged and
 * answers 503 "Retry it", the waiting retry runs the request anew (it answered a final 409
 * completion_cancelled, and only a third try ran it). A streamed retry attached to it keeps it running:
 * its whole reply, charged as it received it (it got 112 tokens, then a cancel that charged nothing).
 */
describe("an Idempotency-Key retry waiting on a request its API process stops", () => {
  let platform: TestPlatform;
  let second: TestApp;
  let key: string;
  // A platform of its own for each case: once told to stop, an API process stops every later job at once.
  beforeEach(async () => {
    platform = await startTestPlatform({ wrapEngine: (_model, engine) => pacedEngine(engine, 500), env: { DELTA_COALESCE_MS: "0" } });
    second = await startSecondApi(platform);
    key = (await platform.createKey()).key;
  }, 60_000);
  afterEach(async () => {
    await second?.close();
    await platform?.close();
  });

  it("runs anew once the first one is stopped, charged once", async () => {
    const post = (baseUrl: string) =>
      fetch(`${baseUrl}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json", "idempotency-key": "retried-while-stopping" },
        body: JSON.stringify({ model: TINY_CHAT, messages: [{ role: "user", content: "Tell me a long story" }], max_tokens: 40, temperature: 0 }),
        signal: AbortSignal.timeout(30_000),
      });
    const first = post(platform.baseUrl);
    await new Promise((resolve) => setTimeout(resolve, 800));
    const retry = post(second.baseUrl);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(platform.inference.interruptRelays()).toBeGreaterThanOrEqual(1);

    const stopped = await first;
    expect(stopped.status).toBe(503);
    const firstId = stopped.headers.get("x-completion-id");
    const answered = await retry;
    const body = (await answered.json()) as { id: string; choices: { message: { content: string } }[]; usage: { completion_tokens: number } };
    expect(answered.status, JSON.stringify(body)).toBe(200);
    expect(body.choices[0]!.message.content.length).toBeGreaterThan(0);
    // Charged once, what it answered (the job went on for the retry attached to it, or ran anew).
    const charged = await completionEvents(platform.deps.pool, body.id);
    expect(charged.filter((e) => e.type === "UsageRecorded").map((e) => e.data.completionTokens)).toEqual([body.usage.completion_tokens]);
    if (firstId && firstId !== body.id) {
      const events = await completionEvents(platform.deps.pool, firstId);
      expect(events.reduce((sum, e) => sum + (e.type === "UsageRecorded" ? e.data.costMicroChf : -e.data.costMicroChf), 0)).toBe(0);
    }
  }, 60_000);

  it("goes on for a streamed retry attached to it: the whole reply, charged once as received", async () => {
    const body = { model: TINY_CHAT, messages: [{ role: "user", content: "Tell me a long story" }], max_tokens: 40, temperature: 0 };
    const headers = { authorization: `Bearer ${key}`, "content-type": "application/json", "idempotency-key": "streamed-retry-while-stopping" };
    const first = fetch(`${platform.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers,
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(30_000),
    });
    await new Promise((resolve) => setTimeout(resolve, 800));
    const retry = await fetch(`${second.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers,
      body: JSON.stringify({ ...body, stream: true, stream_options: { include_usage: true } }),
      signal: AbortSignal.timeout(30_000),
    });
    expect(retry.status).toBe(200);
    const reading = retry.text();
    await new Promise((resolve) => setTimeout(resolve, 300));
    platform.inference.interruptRelays();
    expect((await first).status).toBe(503);
    const events = parseSse(await reading);
    expect(events.at(-1)?.data).toBe("[DONE]");
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e.data) as { error?: unknown; usage?: { completion_tokens: number } | null; choices: unknown[] });
    expect(chunks.filter((c) => c.error !== undefined)).toEqual([]);
    const usage = chunks.at(-1)!.usage!;
    expect(usage.completion_tokens).toBeGreaterThan(0);
    const id = retry.headers.get("x-completion-id")!;
    const charged = await completionEvents(platform.deps.pool, id);
    expect(charged.filter((e) => e.type === "UsageRecorded").map((e) => e.data.completionTokens)).toEqual([usage.completion_tokens]);
  }, 60_000);
});
