import { RateLimitError, SubscriptionRequiredError, type ApiError } from "../../http/errors.ts";
import { microToChf } from "../../../ledger/money.ts";
import type { HoldRefused } from "../../../ledger/budget/placeHold.ts";

export const MONTHLY_BUDGET_EXCEEDED = "monthly_budget_exceeded";

/**
 * The error a refused admission answers with: 429 rate_limit_exceeded / monthly_budget_exceeded, or 402
 * subscription_required when the subscription ended since the key was checked. The 429 has no
 * Retry-After header (retrying before the period resets cannot succeed: clients should treat the code as
 * final) and carries `x-should-retry: false`, which the official OpenAI SDKs honour by not retrying.
 */
export function budgetRefusalError(refusal: HoldRefused): ApiError {
  if (refusal.reason === "subscription_required") return new SubscriptionRequiredError();
  const chf = (micro: number) => `CHF ${microToChf(micro)}`;
  const inUse = refusal.heldMicroChf ? ` and ${chf(refusal.heldMicroChf)} held by requests in progress` : "";
  const error = new RateLimitError(
    `Monthly budget exceeded: this request may cost up to ${chf(refusal.amountMicroChf)}, but ${chf(refusal.spentMicroChf)} spent${inUse} ` +
      `leave too little of the ${chf(refusal.budgetMicroChf)} budget for the billing period ${refusal.period.start} to ${refusal.period.end}. ` +
      `Usage resets at the start of the next billing period, on ${refusal.period.nextStart} (00:00 UTC). ` +
      `Do not retry before then; ask for a higher monthly budget to continue now.`,
    MONTHLY_BUDGET_EXCEEDED,
  );
  // The OpenAI SDKs retry every 429 unless told otherwise; this one cannot succeed before the reset.
  error.headers["x-should-retry"] = "false";
  return error;
}
