import { z } from "zod";

export const MAX_USAGE_RANGE_DAYS = 366;
/** No usage predates this; earlier dates (year 0000 has no PostgreSQL date) are a 400. */
export const MIN_USAGE_DATE = "2000-01-01";

/** A real calendar date written YYYY-MM-DD (2025-02-30 is refused). */
const IsoDateSchema = z
  .string()
  .regex(/^\d{4}-\d{2}-\d{2}$/, "must be a date written YYYY-MM-DD")
  .refine((v) => {
    const d = new Date(`${v}T00:00:00.000Z`);
    return !Number.isNaN(d.getTime()) && d.toISOString().slice(0, 10) === v;
  }, "is not a valid calendar date")
  .refine((v) => v >= MIN_USAGE_DATE, `must be ${MIN_USAGE_DATE} or later`);

/**
 * Query of `GET /api/v1/accounts/user/usage`. Both dates are inclusive UTC days; omitted, they default to
 * the current billing period (the route fills them in). Cross-field checks (order, range) are in
 * usageRange().
 */
export const UsageQuerySchema = z
  .object({
    start_date: IsoDateSchema.optional(),
    end_date: IsoDateSchema.optional(),
    group_by: z.enum(["day", "key", "model"]).default("day"),
  })
  .strict();

export type UsageQuery = z.infer<typeof UsageQuerySchema>;
export type UsageGroupBy = UsageQuery["group_by"];
