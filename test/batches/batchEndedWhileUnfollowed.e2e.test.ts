import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pacedEngine } from "../inference/pacedEngine.ts";
import { eventually } from "../support/eventually.ts";
import { TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";
import { createSameLinesBatch, expectLinesLikeReference, waitForStatus } from "./batchSteps.ts";
import { BatchTestPlatform } from "./batchTestPlatform.ts";

const LINES = 3;

/**
 * A batch cancelled (or whose window ended) while no dispatcher followed its running lines (the API
 * process that ran them stopped, or was killed, and the next came later), their jobs having answered
 * meanwhile, charged: the next dispatcher settles each line from its job. Its answer is in the output
 * file, as charged (a probe saw them listed `batch_cancelled` / `batch_expired` in the error file while
 * charged in full).
 */
describe("lines whose jobs answered while no dispatcher followed them, in a batch that ended meanwhile", () => {
  let batches: BatchTestPlatform;
  let platform: TestPlatform;

  beforeAll(async () => {
    batches = await BatchTestPlatform.start({
      wrapEngine: (_model, engine) => pacedEngine(engine, 100),
      env: { BATCH_POLL_MS: "50", BATCH_MAX_IN_FLIGHT: String(LINES), BATCH_LINE_LEASE_MS: "1000" },
    });
    platform = batches.platform;
  }, 60_000);

  afterAll(async () => {
    await batches?.close();
  });

  for (const ending of ["cancelled", "expired"] as const) {
    it(`${ending}: each answered line is in the output file, charged once; the batch ends ${ending}`, async () => {
      const { key, account } = await platform.createKey();
      const openai = platform.openai(key);
      const body = { model: TINY_CHAT, messages: [{ role: "user" as const, content: "Say hello" }], max_tokens: 8, temperature: 0 };
      const { batchId, customIds } = await createSameLinesBatch(openai, body, LINES);
      const lines = async (status: string) =>
        (await platform.deps.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM batch_lines WHERE batch_id = $1 AND status = $2", [batchId, status]))
          .rows[0]!.n;
      await eventually(async () => ((await lines("running")) === LINES ? true : undefined), 30_000);
      await batches.stopDispatcher();
      // Every line's job answers (and is charged) while no dispatcher follows it.
      await eventually(async () => {
        const charged = await platform.deps.pool.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM es_events WHERE event_type = 'UsageRecorded' AND data->>'accountId' = $1",
          [account.accountId],
        );
        return charged.rows[0]!.n === LINES ? true : undefined;
      }, 30_000);
      if (ending === "cancelled") expect((await openai.batches.cancel(batchId)).status).toBe("cancelling");
      else await platform.deps.pool.query("UPDATE batches SET expires_at = now() - interval '1 second' WHERE id = $1", [batchId]);
      batches.restartDispatcher();

      const done = await waitForStatus(openai, batchId, [ending], 30_000);
      expect(done.request_counts).toEqual({ total: LINES, completed: LINES, failed: 0 });
      const reference = await openai.chat.completions.create(body);
      const model = platform.inference.registry.get(TINY_CHAT)!;
      await expectLinesLikeReference(openai, platform.deps.pool, done, { accountId: account.accountId, customIds, reference, model });
    }, 90_000);
  }
});
