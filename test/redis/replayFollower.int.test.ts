import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ReplayFollower } from "../../src/api/inference/jobs/replayFollower.ts";
import { ServiceUnavailableError } from "../../src/api/http/errors.ts";
import { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import { createTestRedis, type TestRedis } from "../support/testRedis.ts";

/** ReplayFollower on real Redis: what it reads of a replay stream, and how it ends when messages were lost. */
describe("ReplayFollower", () => {
  let testRedis: TestRedis;
  let keys: InferenceKeys;
  beforeAll(async () => {
    testRedis = await createTestRedis();
    keys = new InferenceKeys(testRedis.prefix);
  });
  afterAll(async () => {
    await testRedis?.close();
  });

  const append = (id: string, message: object) => testRedis.redis.xadd(keys.replayStream(id), "*", "m", JSON.stringify(message));
  const delta = (seq: number) => ({ seq, type: "delta", delta: { content: `t${seq}` } });

  it("ends with a 503 when messages after the ones it read were lost with Redis (the stream came back with later ones only)", async () => {
    const id = "chatcmpl-lost-middle";
    await append(id, { seq: 0, type: "started" });
    await append(id, delta(1));
    const follower = new ReplayFollower(testRedis.redis, keys, id, { afterSeq: -1, idleTimeoutMs: 10_000 });
    try {
      expect(await follower.next()).toEqual(delta(1));
      // Redis restarted empty; the worker's next writes arrive.
      await testRedis.redis.del(keys.replayStream(id));
      await append(id, delta(4));
      await expect(follower.next()).rejects.toBeInstanceOf(ServiceUnavailableError);
    } finally {
      follower.release();
    }
  });

  it("reads a stream whose first entries are gone (trimmed) from the first one there, then in order", async () => {
    const id = "chatcmpl-trimmed-start";
    await append(id, delta(3));
    await append(id, delta(4));
    await append(id, { seq: 5, type: "usage", usage: { promptTokens: 1, completionTokens: 2, reasoningTokens: 0 } });
    const follower = new ReplayFollower(testRedis.redis, keys, id, { afterSeq: -1, idleTimeoutMs: 10_000 });
    try {
      expect(await follower.next()).toEqual(delta(3));
      expect(await follower.next()).toEqual(delta(4));
      expect((await follower.next()).type).toBe("usage");
    } finally {
      follower.release();
    }
  });
});
