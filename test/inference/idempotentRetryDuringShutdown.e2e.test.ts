import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TestApp } from "../support/testApp.ts";
import { startSecondApi, startTestPlatform, TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";
import { completionEvents } from "./inferenceSteps.ts";
import { pacedEngine } from "./pacedEngine.ts";

/**
 * A whole answer's retry with its Idempotency-Key that reaches another API process while the first
 * request still runs attaches to it; when the first one's process, about to stop, stops it uncharged and
 * answers 503 "Retry it", the waiting retry runs the request anew (it answered a final 409
 * completion_cancelled, and only a third try ran it).
 */
describe("an Idempotency-Key retry waiting on a request its API process stops", () => {
  let platform: TestPlatform;
  let second: TestApp;
  let key: string;
  beforeAll(async () => {
    platform = await startTestPlatform({ wrapEngine: (_model, engine) => pacedEngine(engine, 500), env: { DELTA_COALESCE_MS: "0" } });
    second = await startSecondApi(platform);
    key = (await platform.createKey()).key;
  }, 60_000);
  afterAll(async () => {
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
    const body = (await answered.json()) as { id: string; choices: { message: { content: string } }[] };
    expect(answered.status, JSON.stringify(body)).toBe(200);
    expect(body.id).not.toBe(firstId);
    expect(body.choices[0]!.message.content.length).toBeGreaterThan(0);
    // The stopped one charged nothing; the retry's run once.
    if (firstId) {
      const events = await completionEvents(platform.deps.pool, firstId);
      expect(events.reduce((sum, e) => sum + (e.type === "UsageRecorded" ? e.data.costMicroChf : -e.data.costMicroChf), 0)).toBe(0);
    }
  }, 60_000);
});
