import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../support/eventually.ts";
import { startTestPlatform, TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";

/**
 * A retry with an Idempotency-Key whose completion has expired (COMPLETION_RETENTION_S shorter than
 * IDEMPOTENCY_TTL_S): a final 409 that says so, at once. It waited for the completion's record for the
 * start timeout (10 minutes), then a 500 (which the SDKs retry: the same wait again), at every retry
 * until the key expired.
 */
let platform: TestPlatform;
let key: string;
beforeAll(async () => {
  platform = await startTestPlatform({ env: { COMPLETION_RETENTION_S: "2" } });
  key = (await platform.createKey()).key;
});
afterAll(async () => {
  await platform?.close();
});

const post = (stream: boolean) =>
  fetch(`${platform.baseUrl}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json", "idempotency-key": "retried-after-expiry" },
    body: JSON.stringify({ model: TINY_CHAT, messages: [{ role: "user", content: "Hi" }], max_tokens: 3, stream }),
    signal: AbortSignal.timeout(20_000),
  });

describe("an Idempotency-Key retry after its completion expired", () => {
  it("is a final 409 idempotency_completion_gone, whole or streamed", async () => {
    const first = await post(false);
    expect(first.status).toBe(200);
    const { id } = (await first.json()) as { id: string };
    await eventually(async () => {
      const read = await fetch(`${platform.baseUrl}/v1/chat/completions/${id}`, { headers: { authorization: `Bearer ${key}` } });
      return read.status === 404 ? true : undefined;
    }, 15_000);
    for (const stream of [false, true]) {
      const retry = await post(stream);
      expect(retry.status).toBe(409);
      expect(retry.headers.get("x-should-retry")).toBe("false");
      expect(((await retry.json()) as { error: { code: string } }).error.code).toBe("idempotency_completion_gone");
    }
  }, 60_000);
});

describe("a Responses Idempotency-Key retry after its completion record expired", () => {
  const create = (store: boolean, idempotencyKey: string) =>
    fetch(`${platform.baseUrl}/v1/responses`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json", "idempotency-key": idempotencyKey },
      body: JSON.stringify({ model: TINY_CHAT, input: "Hi", max_output_tokens: 3, store }),
      signal: AbortSignal.timeout(20_000),
    });
  const recordGone = (id: string) => eventually(async () => ((await platform.inference.records.find(id)) ? undefined : true), 15_000);

  it("is a final 409 at once: idempotency_response_not_stored (store: false), idempotency_response_gone (deleted)", async () => {
    // store: false: it waited out the start timeout, then a retryable 409 `conflict`, at every retry.
    const unstored = await create(false, "response-retried-after-expiry");
    expect(unstored.status).toBe(200);
    await recordGone(((await unstored.json()) as { id: string }).id);
    const started = Date.now();
    const retry = await create(false, "response-retried-after-expiry");
    expect(retry.status).toBe(409);
    expect(retry.headers.get("x-should-retry")).toBe("false");
    expect(((await retry.json()) as { error: { code: string } }).error.code).toBe("idempotency_response_not_stored");
    expect(Date.now() - started).toBeLessThan(3_000);

    // Stored, then deleted by its owner, its record expired as well.
    const stored = await create(true, "deleted-response-retried-after-expiry");
    expect(stored.status).toBe(200);
    const { id } = (await stored.json()) as { id: string };
    const deleted = await fetch(`${platform.baseUrl}/v1/responses/${id}`, { method: "DELETE", headers: { authorization: `Bearer ${key}` } });
    expect(deleted.status).toBe(200);
    await recordGone(id);
    const again = await create(true, "deleted-response-retried-after-expiry");
    expect(again.status).toBe(409);
    expect(((await again.json()) as { error: { code: string } }).error.code).toBe("idempotency_response_gone");
  }, 60_000);
});
