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
