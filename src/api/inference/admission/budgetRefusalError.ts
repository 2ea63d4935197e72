import { RateLimitError, SubscriptionRequiredError, type ApiError } from "../../http/errors.ts";
import { microToChf } from "../../../ledger/money.ts";
import type { HoldRefused } from "../../../ledger/budget/placeHold.ts";

export const MONTHLY_BUDGET_EXCEEDED = "monthly_budget_exceeded";

/** How long a request refused for the budget that requests in progress hold is told to wait before it retries (on average). */
export const BUDGET_IN_USE_RETRY_AFTER_S = 2;

/** Retry-After of a BudgetInUseError: 1 to 3 s, so that clients refused together do not retry together. */
function inUseRetryAfter(): string {
  return String(BUDGET_IN_USE_RETRY_AFTER_S - 1 + Math.floor(Math.random() * 3));
}

/**
 * A request refused for the budget while what is spent leaves room for it: requests in progress hold what
 * they may still cost (their worst case), and give back what they do not use as they end. Retrying can
 * succeed: Retry-After and x-should-retry: true (a batch line waits it out instead of failing).
 */
export class BudgetInUseError extends RateLimitError {
  constructor(message: string) {
    super(message, MONTHLY_BUDGET_EXCEEDED);
  }
}

/**
 * The error a refused admission answers with: 429 rate_limit_exceeded / monthly_budget_exceeded, or 402
 * subscription_required when the subscription ended since the key was checked. A budget the spending
 * leaves no room in gets no Retry-After header (retrying before the period resets cannot succeed: clients
 * should treat the code as final) and `x-should-retry: false`, which the official OpenAI SDKs honour by not
 * retrying; a budget only held by requests in progress, a BudgetInUseError. `ownHoldsMicroChf`: what the
 * request holds in all, when it places several holds (a multi-prompt completion), which the spending must
 * leave room for: its own holds in the way, retrying cannot help. `smallestMicroChf`: the least a request
 * like this one can cost (smallestHoldMicroChf); a final refusal suggests a smaller request only when it fits.
 */
export function budgetRefusalError(
  refusal: HoldRefused,
  options: { ownHoldsMicroChf?: number; ownHeldMicroChf?: number; smallestMicroChf?: number } = {},
): ApiError {
  if (refusal.reason === "subscription_required") return new SubscriptionRequiredError();
  const chf = (micro: number) => `CHF ${microToChf(micro)}`;
  // What the request holds in all (several prompts of one request each hold): the spending must leave room for it.
  const whole = Math.max(refusal.amountMicroChf, options.ownHoldsMicroChf ?? 0);
  const several = whole > refusal.amountMicroChf;
  // Held by other requests: what is held less what this request's own earlier holds hold.
  const others = Math.max(0, refusal.heldMicroChf - (options.ownHeldMicroChf ?? 0));
  // The figures are read after the refusal: holds that refused it may have been given back since.
  const fitsSpending = refusal.spentMicroChf + whole <= refusal.budgetMicroChf;
  const inUse = others ? ` and ${chf(others)} held by requests in progress` : fitsSpending ? " and what requests in progress held then" : "";
  const situation =
    `this request may cost up to ${chf(whole)}${several ? " (its prompts together)" : ""}, but ${chf(refusal.spentMicroChf)} spent${inUse} ` +
    `leave${inUse ? "" : "s"} too little of the ${chf(refusal.budgetMicroChf)} budget for the billing period ${refusal.period.start} to ${refusal.period.end}.`;
  // What is spent leaves room for the whole request (its own holds included): holds of other requests in
  // progress refused it (still there when the figures are read, or given back since), and retrying can
  // succeed. Otherwise (the spending, or the request's own holds together) it cannot: the final 429.
  if (fitsSpending) {
    const error = new BudgetInUseError(
      `Monthly budget in use: ${situation} The requests in progress give back what they do not use as they end: ` +
        `retry after the time in Retry-After, or ask for fewer tokens (max_tokens).`,
    );
    error.headers["retry-after"] = inUseRetryAfter();
    error.headers["x-should-retry"] = "true";
    return error;
  }
  // What is left for a smaller request (a probe read "do not retry" where fewer prompts were admitted at once).
  const left = refusal.budgetMicroChf - refusal.spentMicroChf - others;
  // Only when a smaller request of this kind can fit (its prompt with one output token): a probe was told a
  // smaller one fits where its prompt alone cost more than what was left.
  const smaller =
    options.smallestMicroChf !== undefined && left >= options.smallestMicroChf
      ? `Do not retry this request before then: a smaller one that may cost at most ${chf(left)} (fewer max_tokens, a shorter prompt${several ? ", fewer prompts" : ""}) fits now; or ask for a higher monthly budget.`
      : "Do not retry before then; ask for a higher monthly budget to continue now.";
  const error = new RateLimitError(
    `Monthly budget exceeded: ${situation} ` + `Usage resets at the start of the next billing period, on ${refusal.period.nextStart} (00:00 UTC). ${smaller}`,
    MONTHLY_BUDGET_EXCEEDED,
  );
  // The OpenAI SDKs retry every 429 unless told otherwise; this one cannot succeed before the reset.
  error.headers["x-should-retry"] = "false";
  return error;
}
