import type { Queryable } from "../eventStore/types.ts";
import { billingPeriod } from "./billingPeriod.ts";
import { admitToBudgetSql, type HoldRefused, refusalOf } from "./placeHold.ts";

export type PlaceHoldsInput = {
  accountId: string;
  /** One hold per completion (a multi-prompt completion's prompts), each its worst-case cost. */
  holds: readonly { holdId: string; amountMicroChf: number }[];
  now: Date;
};

/** Every hold placed, or none: the refusal of them together (its amount their sum). */
export type PlaceHoldsResult = { ok: true } | HoldRefused;

const PLACE_HOLDS_SQL = `${admitToBudgetSql("b.account_id, b.period_start")}  ), placed AS (
    INSERT INTO budget_holds (hold_id, account_id, period_start, amount_micro_chf, created_at)
    SELECT h.hold_id, admitted.account_id, admitted.period_start, h.amount, $4::timestamptz
      FROM admitted, unnest($5::text[], $6::bigint[]) AS h(hold_id, amount)
    RETURNING hold_id
  )
  SELECT (SELECT count(*) FROM placed) AS placed`;

/**
 * The holds of several completions of one request (a multi-prompt completion's prompts), all or none,
 * in ONE conditional statement: their sum is held on the account's budget row as placeHold holds one
 * amount (the same checks: subscription, budget, carried holds), and each is recorded in budget_holds.
 * The budget row stays locked for one statement, not for a transaction of one statement per prompt:
 * under a flood of such requests the row's waiters queued past the statement timeout (503
 * database_unavailable with PostgreSQL healthy).
 */
export async function placeHolds(db: Queryable, input: PlaceHoldsInput): Promise<PlaceHoldsResult> {
  const { accountId, holds, now } = input;
  for (const hold of holds) {
    if (!Number.isSafeInteger(hold.amountMicroChf) || hold.amountMicroChf < 0) throw new RangeError("amountMicroChf must be a non-negative integer");
  }
  const total = holds.reduce((sum, hold) => sum + hold.amountMicroChf, 0);
  const period = billingPeriod(now);
  const result = await db.query<{ placed: string }>({
    name: "place-budget-holds-v1",
    text: PLACE_HOLDS_SQL,
    values: [accountId, period.start, total, now.toISOString(), holds.map((h) => h.holdId), holds.map((h) => h.amountMicroChf)],
  });
  if (Number(result.rows[0]!.placed) === holds.length && holds.length > 0) return { ok: true };
  return refusalOf(db, accountId, period, total);
}
