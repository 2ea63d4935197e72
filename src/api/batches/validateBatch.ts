import type { Pool, PoolClient } from "../../db/createPool.ts";
import { withTransaction } from "../../db/withTransaction.ts";
import { appendBatchEvent } from "../../ledger/batches/batchEvents.ts";
import type { FileStore } from "../files/fileStore.ts";
import type { BatchLineError, BatchRow } from "./batchObject.ts";
import { batchLineEndpoint } from "./batchLineEndpoints.ts";
import { BatchInputLineSchema } from "./batchSchemas.ts";
import { checkJsonValue, storableJson } from "../http/jsonValueCheck.ts";
import { jsonlLines } from "./jsonlLines.ts";
import { lineCompletionId } from "./lineCompletionId.ts";

/** How long line checks may run on the event loop before it is handed back (a turn for every other request). */
const VALIDATION_SLICE_MS = 10;

/** The longest line read (a longer one is an error naming it, never held). */
export const MAX_LINE_BYTES = 8 * 1024 * 1024;
/** Errors named in `errors.data` (the rest are counted in the last one). */
const MAX_NAMED_ERRORS = 100;
const INSERT_ROWS = 500;

type PendingLine = { line: number; customId: string; model: string; body: unknown };

/** Attempts after which a batch whose validation keeps failing (not its lines: the attempt itself) fails. */
export const MAX_VALIDATION_ATTEMPTS = 3;
/** A batch of line rows is written once it holds this many bytes of bodies, or INSERT_ROWS rows. */
const INSERT_BYTES = 4 * 1024 * 1024;

/**
 * Validates one batch waiting for it (status validating), in one transaction: the input file is
 * streamed line by line; every line must be JSON with a unique custom_id, method POST, the batch's url,
 * and a body the endpoint's own schema accepts, within the request body's limits and with text PostgreSQL
 * can store. Valid files become batch_lines and the batch in_progress; otherwise the batch fails with
 * errors naming line numbers and no line is kept (nothing ran, nothing is charged). A process that dies
 * part-way rolls back: another validates again.
 *
 * One process validates a batch at a time (a transaction-scoped advisory lock, not the batch's row: its
 * owner can cancel it meanwhile, and the validation then keeps nothing). Each attempt is counted apart
 * from the transaction, and after MAX_VALIDATION_ATTEMPTS a batch whose validation keeps failing (a
 * database error on its content, a timeout) fails, so it holds up the others for a few ticks at most.
 * The accounts with the fewest batches waiting go first: one account's many never keep another's few
 * waiting. Returns false when no batch waited.
 */
export async function validateNextBatch(pool: Pool, files: FileStore, now: () => Date): Promise<boolean> {
  return withTransaction(pool, async (client) => {
    const batch = await pickBatch(pool, client);
    if (!batch) return false;
    const errors =
      batch.validation_attempts > MAX_VALIDATION_ATTEMPTS
        ? [
            {
              code: "validation_failed",
              message: `The input file could not be validated (${MAX_VALIDATION_ATTEMPTS} attempts failed).`,
              param: null,
              line: null,
            },
          ]
        : await readLines(client, files, batch);
    const total = (await client.query<{ n: number }>("SELECT count(*)::int AS n FROM batch_lines WHERE batch_id = $1", [batch.id])).rows[0]!.n;
    if (errors.length === 0 && total === 0) errors.push({ code: "empty_file", message: "The input file has no requests.", param: null, line: null });
    if (errors.length > 0) {
      await client.query("DELETE FROM batch_lines WHERE batch_id = $1", [batch.id]);
      const failed = await client.query("UPDATE batches SET status = 'failed', failed_at = $2, errors = $3 WHERE id = $1 AND status = 'validating'", [
        batch.id,
        now(),
        storableJson(errors),
      ]);
      // Cancelled while it was read: it ends cancelled, with nothing to run.
      if (failed.rowCount === 0) return true;
      await appendBatchEvent(
        client,
        { type: "BatchFailed", data: { batchId: batch.id, accountId: batch.account_id, errors: errors.length, counts: { total: 0, completed: 0, failed: 0 } } },
        "api",
      );
      return true;
    }
    // Its model: the one every line names (none when they name several).
    const started = await client.query(
      `UPDATE batches SET status = 'in_progress', in_progress_at = $2, total_lines = $3,
              model = (SELECT CASE WHEN count(DISTINCT model) = 1 THEN min(model) END FROM batch_lines WHERE batch_id = $1)
        WHERE id = $1 AND status = 'validating'`,
      [batch.id, now(), total],
    );
    if (started.rowCount === 0) await client.query("DELETE FROM batch_lines WHERE batch_id = $1", [batch.id]);
    return true;
  });
}

/**
 * The validating batch this transaction takes (its advisory lock held until it ends), its attempt
 * counted on another connection (kept whatever the transaction's fate); null when none is free.
 */
async function pickBatch(pool: Pool, client: PoolClient): Promise<BatchRow | null> {
  // The accounts with fewest batches waiting first, each account's oldest first: one account's many never
  // keep another's few waiting (an account's next batch ranks first among its own once the one before is
  // validated, so the count, not the rank, is what lets the others through).
  const candidates = await client.query<{ id: string }>(
    `SELECT id FROM (
       SELECT id, seq, count(*) OVER (PARTITION BY account_id) AS account_waiting
         FROM batches WHERE status = 'validating') ranked
      ORDER BY account_waiting, seq LIMIT 8`,
  );
  for (const { id } of candidates.rows) {
    const locked = await client.query<{ ok: boolean }>("SELECT pg_try_advisory_xact_lock(hashtext($1)) AS ok", [`batch-validation:${id}`]);
    if (!locked.rows[0]?.ok) continue;
    const counted = await pool.query<BatchRow>(
      "UPDATE batches SET validation_attempts = validation_attempts + 1 WHERE id = $1 AND status = 'validating' RETURNING *",
      [id],
    );
    if (counted.rows[0]) return counted.rows[0];
  }
  return null;
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
  let pendingBytes = 0;
  const flush = async () => {
    if (pending.length === 0) return;
    const rows = pending;
    pending = [];
    pendingBytes = 0;
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
  // The event loop is handed back every few milliseconds: a file of costly lines (each one a request
  // with many bad items) would otherwise hold it for seconds between two chunks of the file.
  let sliceStart = performance.now();
  for await (const { line, text, problem: unreadable } of jsonlLines(content, MAX_LINE_BYTES)) {
    if (performance.now() - sliceStart > VALIDATION_SLICE_MS) {
      await new Promise((resolve) => setImmediate(resolve));
      sliceStart = performance.now();
    }
    if (unreadable === "not_utf8") {
      fail({ code: "invalid_json_line", message: `Line ${line} is not valid UTF-8 text.`, param: null, line });
      continue;
    }
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
    // Within a request body's limits, and storable (jsonb refuses U+0000 and unpaired surrogates).
    const problem = checkJsonValue(json);
    if (problem) {
      const param = problem.path || null;
      fail({ code: "invalid_request", message: `Line ${line}: ${param ? `'${param}' ` : "the line "}${problem.message}.`, param, line });
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
    pendingBytes += text.length;
    if (pending.length >= INSERT_ROWS || pendingBytes >= INSERT_BYTES) await flush();
  }
  await flush();
  if (more > 0) errors.push({ code: "too_many_errors", message: `${more} more lines have errors.`, param: null, line: null });
  return errors;
}
