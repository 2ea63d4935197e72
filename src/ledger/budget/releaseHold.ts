import type { Queryable } from "../eventStore/types.ts";

/**
 * Releases one hold (a request refused, or failed before it ran, or orphaned): deletes it and takes its
 * amount off its period's `held`, in one statement. Returns the amount released, or null when there was
 * no such unsettled hold (already settled, released or swept), so it is safe to call more than once.
 * A settled hold is never released: it is folded (foldSettledHold), which also charges its cost.
 */
export async function releaseHold(db: Queryable, holdId: string): Promise<number | null> {
  const released = await db.query<{ amount: string }>(
    `WITH h AS (
       DELETE FROM budget_holds WHERE hold_id = $1 AND settled_at IS NULL RETURNING account_id, period_start, amount_micro_chf
     )
     UPDATE rm_budget b
        SET held_micro_chf = b.held_micro_chf - h.amount_micro_chf
       FROM h
      WHERE b.account_id = h.account_id AND b.period_start = h.period_start
     RETURNING h.amount_micro_chf AS amount`,
    [holdId],
  );
  return released.rowCount ? Number(released.rows[0]!.amount) : null;
}

/**
 * Releases the unsettled holds among `holdIds` (lines of a batch ended without a run that settles them:
 * cancelled, expired, or failed after a run that charged nothing), in one statement; ids without such a
 * hold are skipped. Returns how many were released.
 */
export async function releaseHolds(db: Queryable, holdIds: readonly string[]): Promise<number> {
  if (holdIds.length === 0) return 0;
  const released = await db.query<{ n: number }>(
    `WITH h AS (
       DELETE FROM budget_holds WHERE hold_id = ANY($1::text[]) AND settled_at IS NULL RETURNING account_id, period_start, amount_micro_chf
     ), per_period AS (
       SELECT account_id, period_start, sum(amount_micro_chf) AS amount, count(*)::int AS n FROM h GROUP BY account_id, period_start
     ), updated AS (
       UPDATE rm_budget b SET held_micro_chf = b.held_micro_chf - p.amount
         FROM per_period p WHERE b.account_id = p.account_id AND b.period_start = p.period_start
     )
     SELECT COALESCE(sum(n), 0)::int AS n FROM per_period`,
    [holdIds],
  );
  return released.rows[0]?.n ?? 0;
}
