import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pacedEngine } from "../inference/pacedEngine.ts";
import { eventually } from "../support/eventually.ts";
import { TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";
import { createSameLinesBatch, expectLinesLikeReference, waitForStatus } from "./batchSteps.ts";
import { BatchTestPlatform } from "./batchTestPlatform.ts";

const LINES = 4;

/**
 * A batch whose dispatcher stops with lines running and is replaced only after the abandonment grace
 * period has passed (an API process that drains its interactive streams for longer than a short
 * COMPLETION_ABANDON_GRACE_MS): the lines' jobs are not "abandoned" (that is for interactive clients
 * who went away); the next dispatcher follows them to their end, each line done and charged once, whole.
 */
describe("batch lines handed over after the abandonment grace period", () => {
  let batches: BatchTestPlatform;
  let platform: TestPlatform;

  beforeAll(async () => {
    batches = await BatchTestPlatform.start({
      wrapEngine: (_model, engine) => pacedEngine(engine, 150),
      env: { BATCH_POLL_MS: "50", BATCH_MAX_IN_FLIGHT: String(LINES), COMPLETION_ABANDON_GRACE_MS: "200" },
    });
    platform = batches.platform;
  }, 60_000);

  afterAll(async () => {
    await batches?.close();
  });

  it("runs every line to its end, charged once at the batch price for its whole reply", async () => {
    const { key, account } = await platform.createKey();
    const openai = platform.openai(key);
    const body = { model: TINY_CHAT, messages: [{ role: "user" as const, content: "Say hello" }], max_tokens: 12, temperature: 0 };
    const { batchId, customIds } = await createSameLinesBatch(openai, body, LINES);
    // Every line's job generating (its first delta sent), then the dispatcher stops, for longer than the grace period.
    await eventually(async () => {
      const running = await platform.deps.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM batch_lines WHERE batch_id = $1 AND status = 'running'", [
        batchId,
      ]);
      return running.rows[0]!.n === LINES ? true : undefined;
    }, 30_000);
    await new Promise((resolve) => setTimeout(resolve, 400));
    await batches.stopDispatcher();
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    batches.restartDispatcher();

    const done = await waitForStatus(openai, batchId, ["completed", "failed", "expired"], 60_000);
    expect(done.request_counts).toEqual({ total: LINES, completed: LINES, failed: 0 });
    const reference = await openai.chat.completions.create(body);
    const model = platform.inference.registry.get(TINY_CHAT)!;
    await expectLinesLikeReference(openai, platform.deps.pool, done, { accountId: account.accountId, customIds, reference, model });
  }, 120_000);
});
