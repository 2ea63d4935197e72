import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Engine } from "../../workers/engines/engine.ts";
import { eventually } from "../support/eventually.ts";
import { failingEngine } from "../inference/failingEngine.ts";
import { TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";
import { BatchTestPlatform } from "./batchTestPlatform.ts";
import { createSameLinesBatch, waitForStatus } from "./batchSteps.ts";

const LINES = 4;

/**
 * Batch lines whose runs fail for the platform's reason (nothing charged, the line waits to run again
 * under its budget hold), and whose batch then ends without another run: the holds are released when
 * the lines end, not left to the hold sweeper (half an hour of budget held for nothing).
 */
describe("budget holds of batch lines that end without a run to settle them", () => {
  let batches: BatchTestPlatform;
  let platform: TestPlatform;

  beforeAll(async () => {
    batches = await BatchTestPlatform.start({
      env: { BATCH_POLL_MS: "50", BATCH_MAX_IN_FLIGHT: String(LINES) },
      // Every chat fails before any output, as a crashed engine would.
      wrapEngine: (model, engine): Engine => (model.id === TINY_CHAT ? failingEngine(engine, 0) : engine),
    });
    platform = batches.platform;
  }, 60_000);

  afterAll(async () => {
    await batches?.close();
  });

  const openHolds = async (accountId: string) => {
    const { rows } = await platform.deps.pool.query<{ holds: number; held: string | null }>(
      `SELECT (SELECT count(*)::int FROM budget_holds WHERE account_id = $1 AND settled_at IS NULL) AS holds,
              (SELECT sum(held_micro_chf)::text FROM rm_budget WHERE account_id = $1) AS held`,
      [accountId],
    );
    return { holds: rows[0]!.holds, held: Number(rows[0]!.held ?? 0) };
  };

  it("releases the holds of a cancelled batch's lines that were waiting to run again", async () => {
    const { key, account } = await platform.createKey();
    const openai = platform.openai(key);
    const { batchId } = await createSameLinesBatch(openai, { model: TINY_CHAT, messages: [{ role: "user", content: "Hi" }], max_tokens: 8 }, LINES);
    // Every line ran at least once and failed: each holds its budget, waiting to run again.
    await eventually(async () => {
      const { rows } = await platform.deps.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM batch_lines WHERE batch_id = $1 AND attempts >= 1", [
        batchId,
      ]);
      const open = await openHolds(account.accountId);
      return rows[0]!.n === LINES && open.holds === LINES ? true : undefined;
    }, 30_000);
    expect((await openHolds(account.accountId)).held).toBeGreaterThan(0);

    await openai.batches.cancel(batchId);
    const cancelled = await waitForStatus(openai, batchId, ["cancelled"], 30_000);
    expect(cancelled.request_counts).toEqual({ total: LINES, completed: 0, failed: LINES });
    await eventually(async () => ((await openHolds(account.accountId)).holds === 0 ? true : undefined), 10_000);
    expect(await openHolds(account.accountId)).toEqual({ holds: 0, held: 0 });
    // Nothing was charged for the failed runs.
    const { rows } = await platform.deps.pool.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM es_events WHERE event_type = 'UsageRecorded' AND data->>'accountId' = $1",
      [account.accountId],
    );
    expect(rows[0]!.n).toBe(0);
  }, 90_000);
});
