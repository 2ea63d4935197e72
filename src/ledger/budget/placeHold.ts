import type { Queryable } from "../eventStore/types.ts";
import { billingPeriod, type BillingPeriod } from "./billingPeriod.ts";

export type PlaceHoldInput = {
  /** The completion id: one hold per request. */
  holdId: string;
  accountId: string;
  /** Worst-case cost of the request (worstCaseCostMicroChf). */
  amountMicroChf: number;
  now: Date;
  /**
   * The job may already be queued (speculative admission): a refusal is then recorded in refused_holds
   * by the same statement, so the worker knows not to charge it.
   */
  speculative?: boolean;
};

export type HoldPlaced = {
  ok: true;
  holdId: string;
  period: BillingPeriod;
  /** Budget left in the period after this hold (budget - spent - held), for the speculation policy. */
  remainingMicroChf: number;
};

export type HoldRefused = {
  ok: false;
  /** No active subscription (or no such account) -> 402; budget would be passed -> 429. */
  reason: "subscription_required" | "monthly_budget_exceeded";
  period: BillingPeriod;
  amountMicroChf: number;
  budgetMicroChf: number;
  spentMicroChf: number;
  heldMicroChf: number;
};

export type PlaceHoldResult = HoldPlaced | HoldRefused;

/**
 * The account's ($1) holds still open from periods before $2: requests admitted then that have not been
 * folded (running, or settled and waiting for their fold). They are charged to the period they finish in.
 */
export const CARRIED_HOLDS_SQL = "SELECT COALESCE(sum(amount_micro_chf), 0)::bigint FROM budget_holds WHERE account_id = $1::uuid AND period_start < $2::date";

/**
 * The carried holds and the conditional hold of `$3` micro-CHF on the account's budget row of the period
 * (`carried` and `admitted` CTEs; `returning`: what `admitted` returns): one placement's or several's.
 */
export function admitToBudgetSql(returning: string): string {
  return `WITH carried AS (SELECT (${CARRIED_HOLDS_SQL}) AS amount), admitted AS (
    INSERT INTO rm_budget AS b (account_id, period_start, budget_micro_chf, spent_micro_chf, held_micro_chf, updated_at)
    SELECT a.account_id, $2::date, a.monthly_budget_micro_chf, 0, $3::bigint, $4::timestamptz
      FROM rm_accounts a
     WHERE a.account_id = $1::uuid
       AND a.subscription_status = 'active'
       AND $3::bigint + (SELECT amount FROM carried) <= a.monthly_budget_micro_chf
    ON CONFLICT (account_id, period_start) DO UPDATE
       SET held_micro_chf = b.held_micro_chf + EXCLUDED.held_micro_chf,
           budget_micro_chf = EXCLUDED.budget_micro_chf,
           updated_at = EXCLUDED.updated_at
     WHERE b.spent_micro_chf + b.held_micro_chf + EXCLUDED.held_micro_chf + (SELECT amount FROM carried) <= EXCLUDED.budget_micro_chf
    RETURNING ${returning}
`;
}

const PLACE_HOLD_SQL = `${admitToBudgetSql("b.account_id, b.period_start, b.budget_micro_chf - b.spent_micro_chf - b.held_micro_chf - (SELECT amount FROM carried) AS remaining")}  ), placed AS (
    INSERT INTO budget_holds (hold_id, account_id, period_start, amount_micro_chf, created_at)
    SELECT $5, account_id, period_start, $3::bigint, $4::timestamptz FROM admitted
    RETURNING hold_id
  ), refused AS (
    INSERT INTO refused_holds (hold_id, refused_at)
    SELECT $5, $4::timestamptz WHERE $6::boolean AND NOT EXISTS (SELECT 1 FROM admitted)
    ON CONFLICT (hold_id) DO NOTHING
    RETURNING hold_id
  )
  SELECT (SELECT remaining FROM admitted) AS remaining, (SELECT count(*) FROM placed) AS placed, (SELECT count(*) FROM refused) AS refused`;

/**
 * Admission: holds the request's worst-case cost on the account's budget for the billing period of
 * `now`, with ONE conditional statement, so concurrent admissions can never pass the budget together:
 *
 * - the budget is read from rm_accounts (the account's current MonthlyBudgetSet and subscription), so a
 *   change takes effect on the very next request;
 * - the period row is created on the first admission of the month (usage resets at the month start);
 * - an existing row is updated only if spent + held + hold <= budget (ON CONFLICT DO UPDATE ... WHERE
 *   evaluates on the row locked at its latest committed version);
 * - `held` includes the account's holds still open from earlier periods (CARRIED_HOLDS_SQL): a request
 *   admitted before a month's end is charged to the month it finishes in, so the new month's admissions
 *   count it until it is folded (found by a probe: a stream running across midnight took January to
 *   155 % of its budget); each such hold is counted in its own period's row too, so both stay within;
 * - the hold itself is recorded in budget_holds by the same statement, keyed by the completion id;
 * - a speculative admission that is refused is recorded in refused_holds by the same statement.
 *
 * Returns the refusal with the figures the error message needs; budgetRefusalError() turns it into the
 * 429 / 402 ApiError.
 */
export async function placeHold(db: Queryable, input: PlaceHoldInput): Promise<PlaceHoldResult> {
  const { holdId, accountId, amountMicroChf, now } = input;
  if (!Number.isSafeInteger(amountMicroChf) || amountMicroChf < 0) throw new RangeError("amountMicroChf must be a non-negative integer");
  const period = billingPeriod(now);
  // A named statement: parsed and planned once per connection, not on every admission.
  const placed = await db.query<{ remaining: string | null; placed: string }>({
    name: "place-budget-hold-v3",
    text: PLACE_HOLD_SQL,
    values: [accountId, period.start, amountMicroChf, now.toISOString(), holdId, input.speculative === true],
  });
  const row = placed.rows[0]!;
  if (Number(row.placed) === 1) return { ok: true, holdId, period, remainingMicroChf: Number(row.remaining) };
  return refusalOf(db, accountId, period, amountMicroChf);
}

/** A refused hold: the figures for its message, read after the decision (not part of it). */
export async function refusalOf(db: Queryable, accountId: string, period: BillingPeriod, amountMicroChf: number): Promise<HoldRefused> {
  const figures = await db.query<{ subscription_status: string; budget: string; spent: string | null; held: string | null }>(
    `SELECT a.subscription_status, a.monthly_budget_micro_chf AS budget, b.spent_micro_chf AS spent,
            COALESCE(b.held_micro_chf, 0) + (${CARRIED_HOLDS_SQL}) AS held
       FROM rm_accounts a
       LEFT JOIN rm_budget b ON b.account_id = a.account_id AND b.period_start = $2::date
      WHERE a.account_id = $1::uuid`,
    [accountId, period.start],
  );
  const figure = figures.rows[0];
  return {
    ok: false,
    reason: figure && figure.subscription_status === "active" ? "monthly_budget_exceeded" : "subscription_required",
    period,
    amountMicroChf,
    budgetMicroChf: Number(figure?.budget ?? 0),
    spentMicroChf: Number(figure?.spent ?? 0),
    heldMicroChf: Number(figure?.held ?? 0),
  };
}
