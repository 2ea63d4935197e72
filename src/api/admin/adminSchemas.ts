import { z } from "zod";
import { AccountIdSchema, EmailSchema } from "../accounts/accountSchemas.ts";

/** 1e9 CHF: far above any real budget, and its micro-CHF value stays an exact JavaScript integer. */
export const MAX_MONTHLY_BUDGET_CHF = 1_000_000_000;

/**
 * Whether a CHF amount is a whole number of micro-CHF (the unit budgets are kept in): at most 6 decimal
 * places as JavaScript writes the number (its shortest exact form; 1e-7 is written so and refused). A
 * product with 1e6 would not do: near the largest budgets its float error passes any fixed tolerance.
 */
const wholeMicroChf = (chf: number) => /^\d+(\.\d{1,6})?$/.test(String(chf));

/** A budget in CHF: kept in micro-CHF, so at most 6 decimal places (more would be rounded silently). */
export const MonthlyBudgetChfSchema = z
  .number()
  .min(0, "must be a number >= 0")
  .max(MAX_MONTHLY_BUDGET_CHF, `must be at most ${MAX_MONTHLY_BUDGET_CHF}`)
  .refine(wholeMicroChf, "must have at most 6 decimal places (budgets are kept in micro-CHF)");

export const SubscriptionStatusSchema = z.enum(["active", "inactive"]);

/**
 * `PUT /api/v1/admin/accounts/{account_id}/subscription`. `status` is required; `monthly_budget_chf`
 * is optional: omitted, the budget stays what it was (so cancelling does not need to restate it).
 */
export const SetSubscriptionBodySchema = z.object({ status: SubscriptionStatusSchema, monthly_budget_chf: MonthlyBudgetChfSchema.optional() }).strict();
export type SetSubscriptionBody = z.infer<typeof SetSubscriptionBodySchema>;

export const AccountIdParamsSchema = z.object({ account_id: AccountIdSchema });
export type AccountIdParams = z.infer<typeof AccountIdParamsSchema>;

export const FindAccountQuerySchema = z.object({ email: EmailSchema }).strict();
export type FindAccountQuery = z.infer<typeof FindAccountQuerySchema>;

const MAX_RATE_LIMIT = 1_000_000_000_000;
// The bound before the integer check: a value past it (1e20, an integer JavaScript cannot hold exactly) is told the bound.
const RateLimitValueSchema = z
  .number()
  .positive("must be a positive integer")
  .max(MAX_RATE_LIMIT, `must be at most ${MAX_RATE_LIMIT}`)
  .refine(Number.isInteger, "must be an integer")
  .nullable()
  .optional();

/**
 * `PUT /api/v1/admin/accounts/{account_id}/rate_limits`: the subscription's rate limits, per account and
 * per key (each key of the account). A field omitted or null: the deployment's default (configuration).
 */
export const SetRateLimitsBodySchema = z
  .object({
    requests_per_minute: RateLimitValueSchema,
    tokens_per_minute: RateLimitValueSchema,
    concurrent_requests: RateLimitValueSchema,
    key_requests_per_minute: RateLimitValueSchema,
    key_tokens_per_minute: RateLimitValueSchema,
    key_concurrent_requests: RateLimitValueSchema,
  })
  .strict();
export type SetRateLimitsBody = z.infer<typeof SetRateLimitsBodySchema>;
