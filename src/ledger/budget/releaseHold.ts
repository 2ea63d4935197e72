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
