import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { IdempotencyKeys } from "../../src/api/inference/jobs/idempotencyKeys.ts";
import { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import { createTestRedis, type TestRedis } from "../support/testRedis.ts";

/**
 * Giving an Idempotency-Key claim back deletes it only while it names that completion, in one step: two
 * processes gave back one claim at a shutdown, and one re-claimed it for its new run between the other's
 * read and delete; the new claim deleted, a third retry ran and was charged again.
 */
let redis: TestRedis;
let keys: IdempotencyKeys;
beforeAll(async () => {
  redis = await createTestRedis();
  keys = new IdempotencyKeys(redis.redis, new InferenceKeys(redis.prefix), 60);
});
afterAll(async () => {
  await redis?.close();
});

describe("an Idempotency-Key claim given back", () => {
  it("is deleted when it names the completion, kept when it names another", async () => {
    expect(await keys.claim("key-1", "idem", "hash", "chatcmpl-first")).toEqual({ won: true });
    await keys.release("key-1", "idem", "chatcmpl-first");
    expect(await keys.stillClaimed("key-1", "idem", "chatcmpl-first")).toBe(false);
    // Re-claimed for a new run; a late give-back of the first leaves it.
    expect(await keys.claim("key-1", "idem", "hash", "chatcmpl-second")).toEqual({ won: true });
    await keys.release("key-1", "idem", "chatcmpl-first");
    expect(await keys.stillClaimed("key-1", "idem", "chatcmpl-second")).toBe(true);
    // Many give-backs of the first racing the second's claim never delete the second's.
    await keys.release("key-1", "idem", "chatcmpl-second");
    await Promise.all([
      ...Array.from({ length: 50 }, () => keys.release("key-1", "idem", "chatcmpl-first")),
      keys.claim("key-1", "idem", "hash", "chatcmpl-third"),
      ...Array.from({ length: 50 }, () => keys.release("key-1", "idem", "chatcmpl-first")),
    ]);
    expect(await keys.stillClaimed("key-1", "idem", "chatcmpl-third")).toBe(true);
  });
});
