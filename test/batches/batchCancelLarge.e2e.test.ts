import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";
import { BatchTestPlatform } from "./batchTestPlatform.ts";
import { chatLine, readJsonl, uploadBatchFile, waitForStatus } from "./batchSteps.ts";

/**
 * A batch of many waiting lines cancelled: its lines end in statements the API pool's statement timeout
 * allows (one statement for every waiting line was cancelled by the timeout, round after round, and the
 * batch stayed `cancelling`). The app's pool has the API's statement timeout, lowered so that one statement over all the
 * lines cannot finish within it, while each bounded one does.
 */
describe("cancelling a batch of many waiting lines", () => {
  let batches: BatchTestPlatform;
  let platform: TestPlatform;

  beforeAll(async () => {
    batches = await BatchTestPlatform.start({
      env: { BATCH_POLL_MS: "50", BATCH_MAX_IN_FLIGHT: "2", PG_API_STATEMENT_TIMEOUT_MS: "250" },
      databaseUrl: (url) => url,
    });
    platform = batches.platform;
  }, 60_000);

  afterAll(async () => {
    await batches?.close();
  });

  it("ends every waiting line of a 40,000-line batch: cancelled, each line once in the output or error file", async () => {
    const { key } = await platform.createKey();
    const openai = platform.openai(key);
    const total = 40_000;
    const inputFileId = await uploadBatchFile(
      openai,
      Array.from({ length: total }, (_, i) => chatLine(i, TINY_CHAT, 16)),
    );
    const created = await openai.batches.create({ input_file_id: inputFileId, endpoint: "/v1/chat/completions", completion_window: "24h" });
    await waitForStatus(openai, created.id, ["in_progress"]);
    expect((await openai.batches.cancel(created.id, { maxRetries: 0 })).status).toBe("cancelling");

    const cancelled = await waitForStatus(openai, created.id, ["cancelled"]);
    expect(cancelled.request_counts!.completed + cancelled.request_counts!.failed).toBe(total);
    expect(cancelled.request_counts!.failed).toBeGreaterThan(total - 100);
    const errors = await readJsonl(openai, cancelled.error_file_id!);
    expect(errors).toHaveLength(cancelled.request_counts!.failed);
    expect(new Set(errors.map((e) => e.custom_id)).size).toBe(errors.length);
    const lines = await platform.deps.pool.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM batch_lines WHERE batch_id = $1 AND status IN ('waiting', 'running')",
      [created.id],
    );
    expect(lines.rows[0]!.n).toBe(0);
  }, 180_000);
});
