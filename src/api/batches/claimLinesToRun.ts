import type { Pool } from "../../db/createPool.ts";
import { withTransaction } from "../../db/withTransaction.ts";
import type { ActiveBatch, ClaimedLine } from "./batchLines.ts";

/**
 * The batches in progress whose lines a dispatch round claims, at most `limit`: every account's oldest
 * batch first, then every account's second, and so on, so an account with many batches never keeps
 * another's out of the rounds (their lines then share the queue fairly, by account).
 */
export async function batchesToDispatch(pool: Pool, limit: number): Promise<ActiveBatch[]> {
  const batches = await pool.query<ActiveBatch>(
    `SELECT id, account_id, key_id, endpoint, rate_limits FROM (
       SELECT b.id, b.account_id, b.key_id, b.endpoint, a.rate_limits, b.seq,
              row_number() OVER (PARTITION BY b.account_id ORDER BY b.seq) AS account_rank
         FROM batches b JOIN rm_accounts a ON a.account_id::text = b.account_id
        WHERE b.status = 'in_progress' AND b.final_status IS NULL AND a.subscription_status = 'active') ranked
      ORDER BY account_rank, seq LIMIT $1`,
    [limit],
  );
  return batches.rows;
}

/**
 * Claims the lines of a batch that may run now (waiting and due, or running with a lapsed lease), as
 * many as keep its running lines (in every process) at `maxInFlight`, leased for `leaseMs`. Under the
 * batch's advisory lock: two rounds (of this process or another) never count the same room twice.
 */
export async function claimLinesToRun(pool: Pool, batchId: string, maxInFlight: number, leaseMs: number): Promise<ClaimedLine[]> {
  return withTransaction(pool, async (client) => {
    await client.query("SELECT pg_advisory_xact_lock(hashtext($1))", [`batch:${batchId}`]);
    const claimed = await client.query<ClaimedLine>(
      `WITH room AS (
         SELECT GREATEST($2::int - count(*)::int, 0) AS n FROM batch_lines WHERE batch_id = $1 AND status = 'running' AND claimed_until > now()),
       picked AS (
         SELECT line_no FROM batch_lines
         WHERE batch_id = $1 AND ((status = 'waiting' AND (not_before IS NULL OR not_before <= now())) OR (status = 'running' AND claimed_until <= now()))
         ORDER BY line_no LIMIT (SELECT n FROM room) FOR UPDATE SKIP LOCKED)
       UPDATE batch_lines l SET status = 'running', claimed_until = now() + make_interval(secs => $3::double precision / 1000), attempts = attempts + 1
       FROM picked WHERE l.batch_id = $1 AND l.line_no = picked.line_no
       RETURNING l.batch_id, l.line_no, l.model, l.body, l.completion_id, l.attempts`,
      [batchId, maxInFlight, leaseMs],
    );
    return claimed.rows;
  });
}
