import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BatchDispatcher } from "../../src/api/batches/batchDispatcher.ts";
import { eventually } from "../support/eventually.ts";
import { startTestPlatform, TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";
import { createSameLinesBatch, waitForStatus } from "./batchSteps.ts";

const LINES = 12;
const MAX_IN_FLIGHT = 2;

/**
 * A batch's lines run BATCH_MAX_IN_FLIGHT at a time, each line's place filled as soon as it ends: not
 * only at the dispatcher's next tick, which made BATCH_MAX_IN_FLIGHT a rate (16 lines a second with the
 * defaults, however fast the model: a 50,000-line batch took about 52 minutes). The dispatcher here
 * ticks only when the test says (its own ticks ten minutes apart): one tick starts the batch, and the
 * lines run to their end before any other.
 */
describe("a batch's lines, refilled as they end", () => {
  let platform: TestPlatform;
  let dispatcher: BatchDispatcher;

  beforeAll(async () => {
    platform = await startTestPlatform({ env: { BATCH_POLL_MS: "600000", BATCH_MAX_IN_FLIGHT: String(MAX_IN_FLIGHT) } });
    dispatcher = new BatchDispatcher(platform.deps, platform.inference, platform.deps.files!);
  }, 60_000);

  afterAll(async () => {
    await dispatcher?.stop();
    await platform?.close();
  });

  it("runs every line after one tick, never more than BATCH_MAX_IN_FLIGHT at once", async () => {
    const { key } = await platform.createKey();
    const openai = platform.openai(key);
    const { batchId } = await createSameLinesBatch(openai, { model: TINY_CHAT, messages: [{ role: "user", content: "Hi" }], max_tokens: 2 }, LINES);
    // Validates the batch and starts its first lines; no other tick comes.
    await dispatcher.tick();
    let most = 0;
    await eventually(async () => {
      most = Math.max(most, dispatcher.running);
      const { rows } = await platform.deps.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM batch_lines WHERE batch_id = $1 AND status = 'done'", [
        batchId,
      ]);
      return rows[0]!.n === LINES ? true : undefined;
    }, 30_000);
    expect(most).toBeLessThanOrEqual(MAX_IN_FLIGHT);
    // The next tick ends the batch.
    await dispatcher.tick();
    const done = await waitForStatus(openai, batchId, ["completed"], 10_000);
    expect(done.request_counts).toEqual({ total: LINES, completed: LINES, failed: 0 });
  }, 60_000);
});
