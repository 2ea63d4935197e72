import { PassThrough } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { exportAuditLog } from "../../src/api/admin/exportAuditLog.ts";
import { checkpointSignerFromPem, generateCheckpointKeyPair } from "../../src/ledger/audit/checkpointSignature.ts";
import { batchStreamId } from "../../src/ledger/batches/batchEvents.ts";
import { checkExport, parseExportFile } from "../../tools/audit/verifyExport.ts";
import { chatLine, uploadBatchFile, waitForStatus } from "../batches/batchSteps.ts";
import { BatchTestPlatform } from "../batches/batchTestPlatform.ts";
import { TINY_CHAT } from "../support/testPlatform.ts";
import { checkpointEverything } from "./auditFixtures.ts";

/**
 * Batches run through the real API and dispatcher end with a lifecycle event naming their account
 * (BatchCompleted and BatchCancelled from the finalizing, BatchFailed from the validation): the
 * account's export, checkpointed and signed, holds each batch's last event and verifies offline.
 */
describe("batch lifecycle events in the audit export", () => {
  let batches: BatchTestPlatform;

  beforeAll(async () => {
    batches = await BatchTestPlatform.start({ env: { BATCH_POLL_MS: "50", BATCH_MAX_IN_FLIGHT: "4" } });
  }, 60_000);
  afterAll(async () => {
    await batches?.close();
  });

  it("a completed, a failed and a cancelled batch: every lifecycle event names the account, and the signed export verifies", async () => {
    const platform = batches.platform;
    const { key, account } = await platform.createKey();
    const openai = platform.openai(key);
    const create = async (lines: Parameters<typeof uploadBatchFile>[1]) =>
      openai.batches.create({ input_file_id: await uploadBatchFile(openai, lines), endpoint: "/v1/chat/completions", completion_window: "24h" });
    const completed = await create([chatLine(0, TINY_CHAT), chatLine(1, TINY_CHAT)]);
    const failed = await create(["this is not JSON"]);
    const cancelled = await create(Array.from({ length: 50 }, (_, i) => chatLine(i, TINY_CHAT, 64)));
    await openai.batches.cancel(cancelled.id);
    await waitForStatus(openai, completed.id, ["completed"]);
    await waitForStatus(openai, failed.id, ["failed"]);
    await waitForStatus(openai, cancelled.id, ["cancelled"], 90_000);

    const pool = platform.deps.pool;
    const events = await pool.query<{ stream_id: string; event_type: string; account_id: string | null }>(
      "SELECT stream_id, event_type, data->>'accountId' AS account_id FROM es_events WHERE stream_id = ANY($1) ORDER BY stream_id, stream_version",
      [[completed.id, failed.id, cancelled.id].map(batchStreamId)],
    );
    expect(events.rows.map((r) => [r.stream_id, r.event_type]).sort()).toEqual(
      [
        [batchStreamId(completed.id), "BatchCreated"],
        [batchStreamId(completed.id), "BatchCompleted"],
        [batchStreamId(failed.id), "BatchCreated"],
        [batchStreamId(failed.id), "BatchFailed"],
        [batchStreamId(cancelled.id), "BatchCreated"],
        [batchStreamId(cancelled.id), "BatchCancelled"],
      ].sort(),
    );
    for (const row of events.rows) expect(row.account_id, `${row.stream_id} ${row.event_type}`).toBe(account.accountId);

    const pair = generateCheckpointKeyPair();
    await checkpointEverything(pool, checkpointSignerFromPem(pair.privatePem));
    const out = new PassThrough();
    const chunks: Buffer[] = [];
    out.on("data", (c: Buffer) => chunks.push(c));
    await exportAuditLog(pool, account.accountId, "ndjson", out, 5);
    const text = Buffer.concat(chunks).toString("utf8");
    const parsed = parseExportFile(text);
    const exported = new Set(parsed.entries.map(({ entry }) => `${entry.stream_id} ${entry.type}`));
    for (const row of events.rows) expect(exported).toContain(`${row.stream_id} ${row.event_type}`);
    expect(parsed.checkpoints.length).toBeGreaterThanOrEqual(1);
    expect(checkExport(parsed.entries, parsed.checkpoints, pair.publicPem).problems).toEqual([]);
  }, 120_000);
});
