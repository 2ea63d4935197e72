import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Engine } from "../../workers/engines/engine.ts";
import { failingEngine } from "../inference/failingEngine.ts";
import { TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";
import { BatchTestPlatform } from "./batchTestPlatform.ts";
import { createSameLinesBatch, expectLinesLikeReference, waitForStatus } from "./batchSteps.ts";

const LINES = 6;
const FAILURES = 3;

/**
 * Batch lines whose engine fails mid-reply (the platform's failure, not the line's): the line runs again
 * under the same completion id, and what is charged is the reply in the output file, once, at the batch
 * price; the failed runs' partial replies reached nobody and are charged nothing.
 */
describe("batch lines run again after their engine failed mid-reply", () => {
  let batches: BatchTestPlatform;
  let platform: TestPlatform;
  let failuresLeft = FAILURES;

  beforeAll(async () => {
    batches = await BatchTestPlatform.start({
      env: { BATCH_POLL_MS: "50", BATCH_MAX_IN_FLIGHT: "2" },
      // The first chats on the chat model fail after two deltas of their reply.
      wrapEngine: (model, engine): Engine => {
        if (model.id !== TINY_CHAT) return engine;
        const failing = failingEngine(engine, 2);
        return { ...failing, chat: (...args) => (failuresLeft-- > 0 ? failing.chat(...args) : engine.chat(...args)) };
      },
    });
    platform = batches.platform;
  }, 60_000);

  afterAll(async () => {
    await batches?.close();
  });

  it("puts each line's whole reply in the output file, with the usage charged for it once at the batch price", async () => {
    const { key, account } = await platform.createKey();
    const openai = platform.openai(key);
    const body = { model: TINY_CHAT, messages: [{ role: "user" as const, content: "Say hello" }], max_tokens: 16, temperature: 0 };
    const { batchId, customIds } = await createSameLinesBatch(openai, body, LINES);
    const done = await waitForStatus(openai, batchId, ["completed", "failed", "expired"], 90_000);
    expect(failuresLeft).toBeLessThan(0);
    expect(done.request_counts).toEqual({ total: LINES, completed: LINES, failed: 0 });

    // The same request answered interactively, once nothing fails any more: the reply and usage each line must show.
    const reference = await openai.chat.completions.create(body);
    const model = platform.inference.registry.get(TINY_CHAT)!;
    await expectLinesLikeReference(openai, platform.deps.pool, done, { accountId: account.accountId, customIds, reference, model });
    // Nothing else was charged to the account but the reference request.
    const all = await platform.deps.pool.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM es_events WHERE event_type = 'UsageRecorded' AND data->>'accountId' = $1",
      [account.accountId],
    );
    expect(all.rows[0]!.n).toBe(LINES + 1);
  }, 120_000);
});
