import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BatchDispatcher } from "../../src/api/batches/batchDispatcher.ts";
import { TINY_CHAT } from "../support/testPlatform.ts";
import { createTestAccount } from "../support/testAccounts.ts";
import { eventually } from "../support/eventually.ts";
import { BatchTestPlatform } from "./batchTestPlatform.ts";
import { chatLine, readJsonl, uploadBatchFile } from "./batchSteps.ts";

/**
 * A batch whose lines all ended within its window completes, even when the dispatcher's round that
 * finalizes it comes after the window ended (a probe saw 100 lines done, 0 failed, end `expired`).
 * The dispatcher's rounds are driven by hand here, so the window can end between them.
 */
describe("a batch done just before its window ends", () => {
  let batches: BatchTestPlatform;
  beforeAll(async () => {
    batches = await BatchTestPlatform.start({});
    await batches.stopDispatcher();
  }, 60_000);
  afterAll(async () => {
    await batches?.close();
  });

  it("completes, with its output file, although its window ended before the round that finalizes it", async () => {
    const { platform } = batches;
    const account = await createTestAccount(platform.deps.pool, { monthlyBudgetChf: 10 });
    const created = await platform.request("POST", "/api/v1/accounts/user/api-keys/create", { token: account.sessionToken, body: { name: "batch" } });
    const openai = new OpenAI({ baseURL: `${platform.baseUrl}/v1`, apiKey: created.body.key as string, maxRetries: 0 });
    const lines = [0, 1, 2].map((i) => chatLine(i, TINY_CHAT));
    const batch = await openai.batches.create({
      input_file_id: await uploadBatchFile(openai, lines),
      endpoint: "/v1/chat/completions",
      completion_window: "24h",
    });
    const dispatcher = new BatchDispatcher(platform.deps, platform.inference, platform.deps.files!);
    try {
      const count = async (where: string) =>
        (await platform.deps.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM batch_lines WHERE batch_id = $1 ${where}`, [batch.id])).rows[0]!.n;
      // Rounds until every line is dispatched (validated, then started), then none: the lines end on their own.
      await eventually(async () => {
        await dispatcher.tick();
        return (await count("")) === 3 && (await count("AND status = 'waiting'")) === 0 ? true : undefined;
      }, 60_000);
      await eventually(async () => ((await count("AND status NOT IN ('done', 'failed')")) === 0 ? true : undefined), 60_000);
      const before = await openai.batches.retrieve(batch.id);
      expect(before.status).toBe("in_progress");
      expect(before.request_counts).toEqual({ total: 3, completed: 3, failed: 0 });
      // The window ends now, before the next round.
      await platform.deps.pool.query("UPDATE batches SET expires_at = now() - interval '1 second' WHERE id = $1", [batch.id]);
      await dispatcher.tick();
      const done = await openai.batches.retrieve(batch.id);
      expect(done.status).toBe("completed");
      expect(done.request_counts).toEqual({ total: 3, completed: 3, failed: 0 });
      expect(done.expired_at).toBeNull();
      expect(await readJsonl(openai, done.output_file_id!)).toHaveLength(3);
    } finally {
      await dispatcher.stop();
    }
  }, 120_000);
});
