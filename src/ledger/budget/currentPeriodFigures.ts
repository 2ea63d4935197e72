import type { Queryable } from "../eventStore/types.ts";
import { microToChf } from "../money.ts";
import { billingPeriod } from "./billingPeriod.ts";
import { CARRIED_HOLDS_SQL } from "./placeHold.ts";

/** The current billing period's money, as the HTTP API shows it (CHF numbers, up to 6 decimals). */
export type PeriodFigures = {
  /** First day of the period (YYYY-MM-DD, UTC). */
  start: string;
  /** Last day of the period (inclusive). */
  end: string;
  /** When usage resets: the next period's start, ISO timestamp. */
  resets_at: string;
  budget_chf: number;
  spent_chf: number;
  held_chf: number;
  remaining_chf: number;
};

/**
 * Budget, spent, held and remaining for the billing period containing `now`. The budget is the account's
 * current monthly budget (rm_accounts); spent and held come from rm_budget (zero before the first
 * request of the period); held includes the holds still open from earlier periods (charged to this one
 * when they finish: see placeHold).
 */
export async function currentPeriodFigures(db: Queryable, accountId: string, now: Date): Promise<PeriodFigures> {
  const period = billingPeriod(now);
  const result = await db.query<{ budget: string | null; spent: string | null; held: string | null }>(
    `SELECT a.monthly_budget_micro_chf AS budget, b.spent_micro_chf AS spent, COALESCE(b.held_micro_chf, 0) + (${CARRIED_HOLDS_SQL}) AS held
       FROM rm_accounts a
       LEFT JOIN rm_budget b ON b.account_id = a.account_id AND b.period_start = $2::date
      WHERE a.account_id = $1::uuid`,
    [accountId, period.start],
  );
  const row = result.rows[0];
  const budget = Number(row?.budget ?? 0);
  const spent = Number(row?.spent ?? 0);
  const held = Number(row?.held ?? 0);
  return {
    start: period.start,
    end: period.end,
    resets_at: `${period.nextStart}T00:00:00.000Z`,
    budget_chf: microToChf(budget),
    spent_chf: microToChf(spent),
    held_chf: microToChf(held),
    remaining_chf: microToChf(Math.max(0, budget - spent - held)),
  };
}
