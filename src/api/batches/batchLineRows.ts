import type { Pool } from "../../db/createPool.ts";
import { storableJson } from "../http/jsonValueCheck.ts";
import type { ActiveBatch, ClaimedLine } from "./batchLines.ts";

/** How a line ends: its status, answer or error, and what it was charged. */
export type LineResult = {
  status: "done" | "failed";
  /** null: a line that never answered (expired, cancelled): the error file carries its error alone. */
  statusCode: number | null;
  response: unknown;
  error: unknown;
  usage: { promptTokens: number; completionTokens: number; reasoningTokens: number } | null;
};

/**
 * Ends up to `limit` waiting lines of a batch with `error`, counting them as failed, in one statement: how
 * many ended per model, with their completion ids. Called until it ends fewer than `limit`: a batch of
 * 50,000 waiting lines ends in statements the API pool's statement timeout allows. A running line whose
 * lease lapsed is not among them: its job may have answered, charged, while no dispatcher followed it
 * (claimLinesToSettle).
 */
export async function endIdleLines(
  pool: Pool,
  batchId: string,
  error: unknown,
  limit: number,
): Promise<{ model: string; n: number; completion_ids: string[] }[]> {
  const ended = await pool.query<{ model: string; n: number; completion_ids: string[] }>(
    // The first `limit` waiting lines by number, ended by a range of line numbers: one pass over the batch's
    // open lines whatever plan the statistics of a just-filled table lead to (a join on the picked lines
    // was planned as a scan of the open lines per picked line: seconds for 2,000).
    `WITH picked AS (
       SELECT max(line_no) AS last FROM (
         SELECT line_no FROM batch_lines WHERE batch_id = $1 AND status = 'waiting' ORDER BY line_no LIMIT $3) first),
     ended AS (
       UPDATE batch_lines SET status = 'failed', error = $2::jsonb, status_code = NULL, claimed_until = NULL
       WHERE batch_id = $1 AND status = 'waiting' AND line_no <= (SELECT last FROM picked) RETURNING model, completion_id),
     counted AS (UPDATE batches SET failed_lines = failed_lines + (SELECT count(*) FROM ended) WHERE id = $1)
     SELECT model, count(*)::int AS n, array_agg(completion_id) AS completion_ids FROM ended GROUP BY model`,
    [batchId, JSON.stringify(error), limit],
  );
  return ended.rows;
}

/** A running line back to waiting, to be claimed again `delayMs` from now. */
export async function retryLineLater(pool: Pool, line: ClaimedLine, delayMs: number): Promise<void> {
  await pool.query(
    `UPDATE batch_lines SET status = 'waiting', claimed_until = NULL, not_before = now() + make_interval(secs => $3::double precision / 1000)
     WHERE batch_id = $1 AND line_no = $2 AND status = 'running'`,
    [line.batch_id, line.line_no, delayMs],
  );
}

/** Ends a running line with its result, and counts it in its batch; false when it was not running any more. */
export async function settleLine(pool: Pool, line: ClaimedLine, result: LineResult): Promise<boolean> {
  const settled = await pool.query<{ n: number }>(
    `WITH settled AS (
       UPDATE batch_lines SET status = $3, status_code = $4, response = $5::jsonb, error = $6::jsonb, claimed_until = NULL,
         prompt_tokens = $7, completion_tokens = $8, reasoning_tokens = $9
       WHERE batch_id = $1 AND line_no = $2 AND status = 'running' RETURNING status)
     UPDATE batches SET completed_lines = completed_lines + (SELECT count(*) FROM settled WHERE status = 'done'),
       failed_lines = failed_lines + (SELECT count(*) FROM settled WHERE status = 'failed')
     WHERE id = $1 RETURNING (SELECT count(*) FROM settled)::int AS n`,
    [
      line.batch_id,
      line.line_no,
      result.status,
      result.statusCode,
      result.response === null ? null : storableJson(result.response),
      result.error === null ? null : storableJson(result.error),
      result.usage?.promptTokens ?? 0,
      result.usage?.completionTokens ?? 0,
      result.usage?.reasoningTokens ?? 0,
    ],
  );
  return (settled.rows[0]?.n ?? 0) > 0;
}

/** A running line of a cancelling or expired batch whose dispatcher stopped, claimed to be settled from its job. */
export type LineToSettle = { batch: ActiveBatch; ending: "cancelled" | "expired"; line: ClaimedLine };

/**
 * Claims (for `leaseMs`) up to `limit` running lines of cancelling and expired batches whose lease lapsed
 * (the process that ran them stopped): each is settled from its job, never run anew. Its job answered
 * while nobody followed it: the answer (charged) goes to the output file; still running: it is stopped,
 * charging nothing; none: the line ends unanswered.
 */
export async function claimLinesToSettle(pool: Pool, limit: number, leaseMs: number): Promise<LineToSettle[]> {
  const claimed = await pool.query<
    ClaimedLine & { account_id: string; key_id: string; endpoint: ActiveBatch["endpoint"]; rate_limits: unknown; status: string }
  >(
    `WITH picked AS (
       SELECT l.batch_id, l.line_no FROM batch_lines l JOIN batches b ON b.id = l.batch_id
        WHERE l.status = 'running' AND l.claimed_until <= now()
          AND (b.status = 'cancelling' OR (b.status = 'in_progress' AND b.final_status = 'expired'))
        ORDER BY l.batch_id, l.line_no LIMIT $1 FOR UPDATE OF l SKIP LOCKED),
     claimed AS (
       UPDATE batch_lines l SET claimed_until = now() + make_interval(secs => $2::double precision / 1000)
         FROM picked WHERE l.batch_id = picked.batch_id AND l.line_no = picked.line_no
       RETURNING l.batch_id, l.line_no, l.model, l.body, l.completion_id, l.attempts)
     SELECT c.*, b.account_id, b.key_id, b.endpoint, a.rate_limits, b.status
       FROM claimed c JOIN batches b ON b.id = c.batch_id LEFT JOIN rm_accounts a ON a.account_id::text = b.account_id`,
    [limit, leaseMs],
  );
  return claimed.rows.map((r) => ({
    batch: { id: r.batch_id, account_id: r.account_id, key_id: r.key_id, endpoint: r.endpoint, rate_limits: r.rate_limits },
    ending: r.status === "cancelling" ? "cancelled" : "expired",
    line: { batch_id: r.batch_id, line_no: r.line_no, model: r.model, body: r.body, completion_id: r.completion_id, attempts: r.attempts },
  }));
}

/** The running lines of a batch (its model and job id each). */
export async function runningLinesOf(pool: Pool, batchId: string): Promise<{ line_no: number; model: string; completion_id: string }[]> {
  const rows = await pool.query<{ line_no: number; model: string; completion_id: string }>(
    "SELECT line_no, model, completion_id FROM batch_lines WHERE batch_id = $1 AND status = 'running'",
    [batchId],
  );
  return rows.rows;
}

/** Sets the leases of running lines to end `leaseMs` from now (0: now, handed over to any dispatcher). */
export async function leaseLines(pool: Pool, lines: Pick<ClaimedLine, "batch_id" | "line_no">[], leaseMs: number): Promise<void> {
  await pool.query(
    `UPDATE batch_lines l SET claimed_until = now() + make_interval(secs => $2::double precision / 1000)
     FROM jsonb_to_recordset($1::jsonb) AS o(batch_id text, line_no int)
     WHERE l.batch_id = o.batch_id AND l.line_no = o.line_no AND l.status = 'running'`,
    [JSON.stringify(lines.map((l) => ({ batch_id: l.batch_id, line_no: l.line_no }))), leaseMs],
  );
}

/** How a batch ends, while it does: cancelled (cancelling) or expired (its window over); null otherwise. */
export async function batchEnding(pool: Pool, batchId: string): Promise<"cancelled" | "expired" | null> {
  const row = await pool.query<{ status: string; final_status: string | null }>("SELECT status, final_status FROM batches WHERE id = $1", [batchId]);
  const batch = row.rows[0];
  if (batch?.status === "cancelling") return "cancelled";
  return batch?.status === "in_progress" && batch.final_status === "expired" ? "expired" : null;
}
