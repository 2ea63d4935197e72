import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ApiPresence } from "../../src/contracts/apiPresence.ts";
import { CompletionRecords } from "../../src/api/inference/jobs/completionRecords.ts";
import { discardResponseReplay } from "../../src/api/inference/endpoints/responses/responseReplayRetention.ts";
import { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import { eventually } from "../support/eventually.ts";
import { createTestRedis, type TestRedis } from "../support/testRedis.ts";

/**
 * A deleted response's replay stream (its text) leaves Redis at once and, when its job was running, again
 * once the job wrote its last message: a worker stopping it writes what it generated meanwhile and its end
 * after the delete, which would otherwise stay for the retention (24 h).
 */
describe("discardResponseReplay", () => {
  let redis: TestRedis;
  let keys: InferenceKeys;
  let records: CompletionRecords;
  beforeAll(async () => {
    redis = await createTestRedis();
    keys = new InferenceKeys(redis.prefix);
    records = new CompletionRecords(redis.redis, keys, 86_400, { process: "test-api", presence: new ApiPresence(redis.redis, keys) });
  });
  afterAll(async () => {
    await redis?.close();
  });

  const write = (id: string, message: object) => redis.redis.xadd(keys.replayStream(id), "*", "m", JSON.stringify(message));

  it("drops the stream at once, and the messages a running job writes after the delete once it wrote its end", async () => {
    const id = "resp_0123456789abcdef01234567";
    await write(id, { seq: 0, type: "delta", delta: { content: "secret" } });
    await discardResponseReplay(records, id, true);
    expect(await redis.redis.exists(keys.replayStream(id))).toBe(0);
    // The worker, stopped, writes on: a delta, then its end.
    await write(id, { seq: 1, type: "delta", delta: { content: " text" } });
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(await redis.redis.exists(keys.replayStream(id))).toBe(1);
    await write(id, { seq: 2, type: "error", error: { kind: "cancelled", message: "cancelled", param: null } });
    await eventually(async () => ((await redis.redis.exists(keys.replayStream(id))) === 0 ? true : undefined), 5_000);
  });

  it("drops a finished response's stream once, with nothing left to watch", async () => {
    const id = "resp_fedcba9876543210fedcba98";
    await write(id, { seq: 0, type: "usage", usage: { promptTokens: 1, completionTokens: 1, reasoningTokens: 0 }, finishReason: "stop" });
    await discardResponseReplay(records, id, false);
    expect(await redis.redis.exists(keys.replayStream(id))).toBe(0);
  });
});
