import type { Queryable } from "../eventStore/types.ts";

/**
 * foldSettledHold of every hold of `holdIds` in ONE statement (see foldSettledHold): deletes the settled
 * holds among them, takes each one's amount off `held` of the period it was placed in and adds its
 * actual cost to `spent` of the period its job finished in, summed per budget row, so a row that several
 * of them touch is updated once. Returns, in the order of `holdIds`, each hold's amount, or null when
 * there is no settled hold of that id (already folded, not settled yet, or named earlier in the same
 * call): as foldSettledHold called for each in turn.
 *
 * The budget rows are locked in (account, period) order, by one INSERT ... ON CONFLICT, so two of these
 * statements never wait for each other's rows crosswise; admissions and releases lock one row each.
 */
export async function foldSettledHolds(db: Queryable, holdIds: string[]): Promise<(number | null)[]> {
  if (holdIds.length === 0) return [];
  const folded = await db.query<{ hold_id: string; released: string }>({ name: "fold-settled-holds-v1", text: FOLD_SQL, values: [holdIds] });
  const released = new Map(folded.rows.map((row) => [row.hold_id, Number(row.released)]));
  return holdIds.map((holdId) => {
    const amount = released.get(holdId);
    if (amount === undefined) return null;
    released.delete(holdId);
    return amount;
  });
}

/**
 * $1 hold ids. `moved`: per budget row (account, period), the costs charged to it (holds settled in that
 * period) and the amounts released from it (holds placed in that period). A row with a charge may not
 * exist yet (the finishing period's first charge: created, held 0); a row that only releases holds
 * exists (the admission that placed them created it) and is only updated, never created empty.
 */
const FOLD_SQL = `
WITH h AS (
  DELETE FROM budget_holds WHERE hold_id = ANY($1::text[]) AND settled_at IS NOT NULL
  RETURNING hold_id, account_id, period_start, amount_micro_chf, settled_cost_micro_chf, settled_period
), moved AS (
  SELECT account_id, period_start, sum(spent)::bigint AS spent, sum(held)::bigint AS held, bool_or(charged) AS charged
    FROM (SELECT account_id, settled_period AS period_start, settled_cost_micro_chf AS spent, 0::bigint AS held, true AS charged FROM h
          UNION ALL
          SELECT account_id, period_start, 0::bigint, amount_micro_chf, false FROM h) m
   GROUP BY account_id, period_start
), written AS (
  INSERT INTO rm_budget AS b (account_id, period_start, budget_micro_chf, spent_micro_chf, held_micro_chf, updated_at)
  SELECT m.account_id, m.period_start,
         COALESCE((SELECT monthly_budget_micro_chf FROM rm_accounts a WHERE a.account_id = m.account_id), 0),
         m.spent, 0, now()
    FROM moved m
   WHERE m.charged OR EXISTS (SELECT 1 FROM rm_budget r WHERE r.account_id = m.account_id AND r.period_start = m.period_start)
   ORDER BY m.account_id, m.period_start
  ON CONFLICT (account_id, period_start) DO UPDATE
     SET spent_micro_chf = b.spent_micro_chf + EXCLUDED.spent_micro_chf,
         held_micro_chf = b.held_micro_chf - (SELECT m2.held FROM moved m2 WHERE m2.account_id = b.account_id AND m2.period_start = b.period_start),
         updated_at = EXCLUDED.updated_at
  RETURNING 1
)
SELECT h.hold_id, h.amount_micro_chf AS released, (SELECT count(*) FROM written) AS written FROM h`;
