import type { Pool } from "../../db/createPool.ts";
import { withTransaction } from "../../db/withTransaction.ts";
import { appendBatchEvent } from "../../ledger/batches/batchEvents.ts";
import type { FileStore } from "../files/fileStore.ts";
import type { BatchRow } from "./batchObject.ts";

const PAGE = 500;

type LineRow = { line_no: number; custom_id: string; completion_id: string; status_code: number | null; response: unknown; error: unknown };

/** The lines of a batch with one status, page by page (never all in memory), as OpenAI's output JSONL lines. */
async function* outputLines(pool: Pool, batchId: string, status: "done" | "failed"): AsyncGenerator<string> {
  let after = 0;
  for (;;) {
    const page = await pool.query<LineRow>(
      `SELECT line_no, custom_id, completion_id, status_code, response, error FROM batch_lines
       WHERE batch_id = $1 AND status = $2 AND line_no > $3 ORDER BY line_no LIMIT ${PAGE}`,
      [batchId, status, after],
    );
    let text = "";
    for (const row of page.rows) {
      const id = `batch_req_${row.completion_id.slice(row.completion_id.indexOf("-") + 1)}`;
      const response =
        row.status_code === null ? null : { status_code: row.status_code, request_id: row.completion_id, body: status === "done" ? row.response : row.error };
      const error = row.status_code === null ? row.error : null;
      text += `${JSON.stringify({ id, custom_id: row.custom_id, response, error })}\n`;
    }
    if (text) yield text;
    if (page.rows.length < PAGE) return;
    after = page.rows.at(-1)!.line_no;
  }
}

/**
 * Ends one batch whose lines are all done or failed (status finalizing, or cancelling): the output
 * file (lines with a 2xx body) and the error file (the others) written through the FileStore (purpose
 * batch_output), then the batch's final status, its files and the lifecycle event with its counts, in
 * one transaction holding the batch's row (another process finalising at the same time skips it; one
 * that dies part-way leaves the batch for another, which deletes the files it wrote, recorded in
 * batch_written_files, and writes them again). False: nothing to do.
 */
export async function finalizeBatch(pool: Pool, files: FileStore, batchId: string, now: () => Date): Promise<boolean> {
  return withTransaction(pool, async (client) => {
    const picked = await client.query<BatchRow & { final_status: string | null }>(
      "SELECT * FROM batches WHERE id = $1 AND status IN ('finalizing', 'cancelling') FOR UPDATE SKIP LOCKED",
      [batchId],
    );
    const batch = picked.rows[0];
    if (!batch) return false;
    const open = await client.query("SELECT 1 FROM batch_lines WHERE batch_id = $1 AND status IN ('waiting', 'running') LIMIT 1", [batchId]);
    if (open.rowCount) return false;
    // Files an earlier attempt wrote before it died: deleted, then written again.
    const earlier = await client.query<{ file_id: string }>("SELECT file_id FROM batch_written_files WHERE batch_id = $1", [batch.id]);
    for (const { file_id } of earlier.rows) {
      await files.delete(batch.account_id, file_id);
      await pool.query("DELETE FROM batch_written_files WHERE file_id = $1", [file_id]);
    }
    const write = async (status: "done" | "failed", filename: string) => {
      const file = await files.create({
        accountId: batch.account_id,
        purpose: "batch_output",
        filename,
        content: outputLines(pool, batch.id, status),
        maxBytes: Number.MAX_SAFE_INTEGER,
        maxLines: Number.MAX_SAFE_INTEGER,
        ...(batch.output_expires_after_s !== null ? { expiresAfterSeconds: batch.output_expires_after_s } : {}),
      });
      // Recorded at once, outside this transaction: it outlives this attempt if the process dies now.
      await pool.query("INSERT INTO batch_written_files (file_id, batch_id, account_id) VALUES ($1, $2, $3)", [file.id, batch.id, batch.account_id]);
      return file;
    };
    const output = batch.completed_lines > 0 ? await write("done", `${batch.id}_output.jsonl`) : null;
    const errors = batch.failed_lines > 0 ? await write("failed", `${batch.id}_error.jsonl`) : null;
    const final = batch.status === "cancelling" ? "cancelled" : batch.final_status === "expired" ? "expired" : "completed";
    const at = now();
    await client.query(`UPDATE batches SET status = $2, ${final}_at = $3, output_file_id = $4, error_file_id = $5 WHERE id = $1`, [
      batch.id,
      final,
      at,
      output?.id ?? null,
      errors?.id ?? null,
    ]);
    const counts = { total: batch.total_lines, completed: batch.completed_lines, failed: batch.failed_lines };
    const type = final === "cancelled" ? "BatchCancelled" : final === "expired" ? "BatchExpired" : "BatchCompleted";
    await appendBatchEvent(client, { type, data: { batchId: batch.id, accountId: batch.account_id, counts } }, "api");
    // Committed with the final status: these files are the batch's now.
    await client.query("DELETE FROM batch_written_files WHERE batch_id = $1", [batch.id]);
    return true;
  });
}
