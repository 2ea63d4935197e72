import type { Pool } from "../../db/createPool.ts";
import { storableJson } from "../http/jsonValueCheck.ts";
import type { ClaimedLine } from "./batchLines.ts";

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
 * Ends the lines of a batch that no dispatcher runs (waiting, or running with a lapsed lease) with
 * `error`, counting them as failed, in one statement: how many ended per model, with their completion ids.
 */
export async function endIdleLines(pool: Pool, batchId: string, error: unknown): Promise<{ model: string; n: number; completion_ids: string[] }[]> {
  const ended = await pool.query<{ model: string; n: number; completion_ids: string[] }>(
    `WITH ended AS (
       UPDATE batch_lines SET status = 'failed', error = $2::jsonb, status_code = NULL, claimed_until = NULL
       WHERE batch_id = $1 AND (status = 'waiting' OR (status = 'running' AND claimed_until <= now())) RETURNING model, completion_id),
     counted AS (UPDATE batches SET failed_lines = failed_lines + (SELECT count(*) FROM ended) WHERE id = $1)
     SELECT model, count(*)::int AS n, array_agg(completion_id) AS completion_ids FROM ended GROUP BY model`,
    [batchId, JSON.stringify(error)],
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
