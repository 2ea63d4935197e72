import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { microToChf } from "../../src/ledger/money.ts";
import { silentLogger } from "../../src/observability/logger.ts";
import { allProjections } from "../../projections/allProjections.ts";
import { ProjectionRunner } from "../../projections/projectionRunner.ts";
import { eventually } from "../support/eventually.ts";
import { TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";
import { BatchTestPlatform } from "./batchTestPlatform.ts";
import { chatLine, uploadBatchFile, waitForStatus } from "./batchSteps.ts";

/**
 * Batch spend in the usage API: after a batch's lines are charged (at the batch discount) and two
 * interactive requests, GET /api/v1/accounts/user/usage shows the batch's requests and cost apart
 * (equal to the sum of the lines' discounted charges) within totals that also hold the interactive spend.
 */
describe("batch spend in the usage API", () => {
  let batches: BatchTestPlatform;
  let platform: TestPlatform;
  let runner: ProjectionRunner;

  beforeAll(async () => {
    batches = await BatchTestPlatform.start({ env: { BATCH_POLL_MS: "50", BATCH_MAX_IN_FLIGHT: "4" } });
    platform = batches.platform;
    runner = new ProjectionRunner({ pool: platform.deps.pool, logger: silentLogger, projections: allProjections, batchSize: 100, pollIntervalMs: 20 });
    runner.start();
  }, 60_000);

  afterAll(async () => {
    await runner?.stop();
    await batches?.close();
  });

  it("shows batch_requests and batch_cost_chf equal to the batch lines' charges, the interactive spend apart", async () => {
    const { key, account } = await platform.createKey();
    const openai = platform.openai(key);
    for (let i = 0; i < 2; i++) await openai.chat.completions.create({ model: TINY_CHAT, messages: [{ role: "user", content: `Hi ${i}` }], max_tokens: 4 });
    const inputFileId = await uploadBatchFile(
      openai,
      Array.from({ length: 6 }, (_, i) => chatLine(i, TINY_CHAT)),
    );
    const batch = await openai.batches.create({ input_file_id: inputFileId, endpoint: "/v1/chat/completions", completion_window: "24h" });
    expect((await waitForStatus(openai, batch.id, ["completed", "failed"], 90_000)).request_counts).toEqual({ total: 6, completed: 6, failed: 0 });

    const charges = await platform.deps.pool.query<{ cost: number; batch: boolean }>(
      "SELECT (data->>'costMicroChf')::bigint::int AS cost, data ? 'batchDiscountBps' AS batch FROM es_events WHERE event_type = 'UsageRecorded' AND data->>'accountId' = $1",
      [account.accountId],
    );
    const batchCost = charges.rows.filter((c) => c.batch).reduce((s, c) => s + c.cost, 0);
    const interactiveCost = charges.rows.filter((c) => !c.batch).reduce((s, c) => s + c.cost, 0);
    expect(charges.rows.filter((c) => c.batch)).toHaveLength(6);
    expect(batchCost).toBeGreaterThan(0);
    expect(interactiveCost).toBeGreaterThan(0);

    const usage = await eventually(async () => {
      const res = await platform.request("GET", "/api/v1/accounts/user/usage?group_by=model", { token: account.sessionToken });
      return res.body.total?.requests === 8 ? res.body : undefined;
    }, 30_000);
    expect(usage.total.batch_requests).toBe(6);
    expect(usage.total.batch_cost_chf).toBe(microToChf(batchCost));
    expect(usage.total.cost_chf).toBe(microToChf(batchCost + interactiveCost));
    expect(usage.data).toEqual([expect.objectContaining({ model: TINY_CHAT, requests: 8, batch_requests: 6, batch_cost_chf: microToChf(batchCost) })]);
  }, 150_000);
});
