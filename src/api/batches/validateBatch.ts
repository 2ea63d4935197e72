import type { Pool, PoolClient } from "../../db/createPool.ts";
import { withTransaction } from "../../db/withTransaction.ts";
import { appendBatchEvent } from "../../ledger/batches/batchEvents.ts";
import type { FileStore } from "../files/fileStore.ts";
import type { BatchLineError, BatchRow } from "./batchObject.ts";
import { batchLineEndpoint } from "./batchLineEndpoints.ts";
import { BatchInputLineSchema } from "./batchSchemas.ts";
import { jsonlLines } from "./jsonlLines.ts";
import { lineCompletionId } from "./lineCompletionId.ts";

/** The longest line read (a longer one is an error naming it, never held). */
export const MAX_LINE_BYTES = 8 * 1024 * 1024;
/** Errors named in `errors.data` (the rest are counted in the last one). */
const MAX_NAMED_ERRORS = 100;
const INSERT_ROWS = 500;

type PendingLine = { line: number; customId: string; model: string; body: unknown };

/**
 * Validates one batch waiting for it (status validating), in one transaction that holds its row: the
 * input file is streamed line by line; every line must be JSON with a unique custom_id, method POST,
 * the batch's url, and a body the endpoint's own schema accepts. Valid files become batch_lines and the
 * batch in_progress; otherwise the batch fails with errors naming line numbers and no line is kept
 * (nothing ran, nothing is charged). A process that dies part-way rolls back: another validates again.
 * Returns false when no batch waited.
 */
export async function validateNextBatch(pool: Pool, files: FileStore, now: () => Date): Promise<boolean> {
  return withTransaction(pool, async (client) => {
    const picked = await client.query<BatchRow>("SELECT * FROM batches WHERE status = 'validating' ORDER BY seq LIMIT 1 FOR UPDATE SKIP LOCKED");
    const batch = picked.rows[0];
    if (!batch) return false;
    const errors = await readLines(client, files, batch);
    const total = (await client.query<{ n: number }>("SELECT count(*)::int AS n FROM batch_lines WHERE batch_id = $1", [batch.id])).rows[0]!.n;
    if (errors.length === 0 && total === 0) errors.push({ code: "empty_file", message: "The input file has no requests.", param: null, line: null });
    if (errors.length > 0) {
      await client.query("DELETE FROM batch_lines WHERE batch_id = $1", [batch.id]);
      await client.query("UPDATE batches SET status = 'failed', failed_at = $2, errors = $3 WHERE id = $1", [batch.id, now(), JSON.stringify(errors)]);
      await appendBatchEvent(
        client,
        { type: "BatchFailed", data: { batchId: batch.id, errors: errors.length, counts: { total: 0, completed: 0, failed: 0 } } },
        "api",
      );
      return true;
    }
    // Its model: the one every line names (none when they name several).
    await client.query(
      `UPDATE batches SET status = 'in_progress', in_progress_at = $2, total_lines = $3,
              model = (SELECT CASE WHEN count(DISTINCT model) = 1 THEN min(model) END FROM batch_lines WHERE batch_id = $1)
        WHERE id = $1`,
      [batch.id, now(), total],
    );
    return true;
  });
}

async function readLines(client: PoolClient, files: FileStore, batch: BatchRow): Promise<BatchLineError[]> {
  const errors: BatchLineError[] = [];
  let more = 0;
  const fail = (error: BatchLineError) => {
    if (errors.length < MAX_NAMED_ERRORS) errors.push(error);
    else more++;
  };
  const content = await files.open(batch.account_id, batch.input_file_id);
  if (!content) return [{ code: "invalid_file", message: `The input file ${batch.input_file_id} no longer exists.`, param: "input_file_id", line: null }];
  const endpoint = batchLineEndpoint(batch.endpoint);
  if (!endpoint) return [{ code: "invalid_endpoint", message: `${batch.endpoint} is not served by batches on this platform.`, param: "endpoint", line: null }];
  let pending: PendingLine[] = [];
  const flush = async () => {
    if (pending.length === 0) return;
    const rows = pending;
    pending = [];
    const inserted = await client.query<{ line_no: number }>(
      `INSERT INTO batch_lines (batch_id, line_no, custom_id, model, body, completion_id)
       SELECT $1, l.line_no, l.custom_id, l.model, l.body, l.completion_id
       FROM jsonb_to_recordset($2::jsonb) AS l(line_no int, custom_id text, model text, body jsonb, completion_id text)
       ON CONFLICT (batch_id, custom_id) DO NOTHING RETURNING line_no`,
      [
        batch.id,
        JSON.stringify(
          rows.map((r) => ({
            line_no: r.line,
            custom_id: r.customId,
            model: r.model,
            body: r.body,
            completion_id: lineCompletionId(batch.endpoint, batch.id, r.line),
          })),
        ),
      ],
    );
    const kept = new Set(inserted.rows.map((r) => r.line_no));
    for (const row of rows) {
      if (!kept.has(row.line))
        fail({ code: "duplicate_custom_id", message: `The custom_id '${row.customId}' is used by an earlier line.`, param: "custom_id", line: row.line });
    }
  };
  for await (const { line, text } of jsonlLines(content, MAX_LINE_BYTES)) {
    if (text === null) {
      fail({ code: "line_too_long", message: `Line ${line} is longer than ${MAX_LINE_BYTES} bytes.`, param: null, line });
      continue;
    }
    if (text.trim() === "") continue;
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      fail({ code: "invalid_json_line", message: `Line ${line} is not valid JSON.`, param: null, line });
      continue;
    }
    const parsed = BatchInputLineSchema.safeParse(json);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      const param = issue.path.join(".") || null;
      fail({ code: "invalid_request", message: `Line ${line}: ${param ? `'${param}': ` : ""}${issue.message}`, param, line });
      continue;
    }
    if (parsed.data.url !== batch.endpoint) {
      fail({
        code: "mismatched_url",
        message: `Line ${line}: the url '${parsed.data.url}' is not the batch's endpoint ${batch.endpoint}.`,
        param: "url",
        line,
      });
      continue;
    }
    const checked = endpoint.check(parsed.data.body);
    if (!checked.ok) {
      const param = checked.error.param ? `body.${checked.error.param}` : "body";
      fail({ code: checked.error.code ?? "invalid_request", message: `Line ${line}: ${checked.error.message}`, param, line });
      continue;
    }
    // Once a line failed nothing is kept: the rest is only checked (duplicates included, below).
    pending.push({ line, customId: parsed.data.custom_id, model: checked.model, body: parsed.data.body });
    if (pending.length >= INSERT_ROWS) await flush();
  }
  await flush();
  if (more > 0) errors.push({ code: "too_many_errors", message: `${more} more lines have errors.`, param: null, line: null });
  return errors;
}
