import type { Queryable } from "../eventStore/types.ts";

/**
 * The second half of settling (see recordUsage): folds one settled hold into rm_budget in one
 * statement: deletes the hold, takes its amount off `held` of the period it was placed in and adds the
 * actual cost to `spent` of the period the job finished in (the same row unless the job crossed a month
 * boundary). Returns the hold's amount, or null when there is no settled hold of that id (already
 * folded, or not settled yet): safe to call more than once and from the sweeper.
 *
 * Run it on connections with synchronous_commit off: the budget row is locked only until the commit,
 * which then does not wait for a disk flush. Losing the fold in a crash loses nothing: the settled hold
 * is still there (its first half was durable) and the sweeper folds it again.
 */
export async function foldSettledHold(db: Queryable, holdId: string): Promise<number | null> {
  const folded = await db.query<{ released: string | null }>({ name: "fold-settled-hold", text: FOLD_SQL, values: [holdId] });
  const released = folded.rows[0]?.released ?? null;
  return released === null ? null : Number(released);
}

/**
 * $1 hold id. `charged` and `released_earlier` touch different rm_budget rows (different periods); a
 * hold's own period row exists (admission created it), the finishing period's row may not yet.
 */
const FOLD_SQL = `
WITH h AS (
  DELETE FROM budget_holds WHERE hold_id = $1 AND settled_at IS NOT NULL
  RETURNING account_id, period_start, amount_micro_chf, settled_cost_micro_chf, settled_period
), charged AS (
  INSERT INTO rm_budget AS b (account_id, period_start, budget_micro_chf, spent_micro_chf, held_micro_chf, updated_at)
  SELECT h.account_id, h.settled_period,
         COALESCE((SELECT monthly_budget_micro_chf FROM rm_accounts a WHERE a.account_id = h.account_id), 0),
         h.settled_cost_micro_chf, 0, now()
    FROM h
  ON CONFLICT (account_id, period_start) DO UPDATE
     SET spent_micro_chf = b.spent_micro_chf + EXCLUDED.spent_micro_chf,
         held_micro_chf = b.held_micro_chf - COALESCE((SELECT amount_micro_chf FROM h WHERE h.period_start = b.period_start), 0),
         updated_at = EXCLUDED.updated_at
  RETURNING 1
), released_earlier AS (
  UPDATE rm_budget b
     SET held_micro_chf = b.held_micro_chf - h.amount_micro_chf, updated_at = now()
    FROM h
   WHERE b.account_id = h.account_id AND b.period_start = h.period_start AND h.period_start <> h.settled_period
  RETURNING 1
)
SELECT (SELECT amount_micro_chf FROM h) AS released,
       (SELECT count(*) FROM charged) + (SELECT count(*) FROM released_earlier) AS written`;
