import { InvalidRequestError } from "../http/errors.ts";
import { billingPeriod } from "../../ledger/budget/billingPeriod.ts";
import { MAX_USAGE_RANGE_DAYS, type UsageQuery } from "./usageQuerySchema.ts";

export type UsageRange = { startDate: string; endDate: string };

const DAY_MS = 86_400_000;
const dayNumber = (date: string) => Date.parse(`${date}T00:00:00.000Z`) / DAY_MS;

/**
 * The inclusive day range of a usage query: defaults to the current billing period; 400 naming the
 * parameter when end_date is before start_date or the range spans more than 366 days.
 */
export function usageRange(query: UsageQuery, now: Date): UsageRange {
  const period = billingPeriod(now);
  const startDate = query.start_date ?? period.start;
  const endDate = query.end_date ?? (query.start_date && query.start_date > period.end ? query.start_date : period.end);
  const days = dayNumber(endDate) - dayNumber(startDate) + 1;
  if (days < 1) {
    throw new InvalidRequestError(`Invalid 'end_date': ${endDate} is before start_date ${startDate}.`, { param: "end_date", code: "invalid_value" });
  }
  if (days > MAX_USAGE_RANGE_DAYS) {
    throw new InvalidRequestError(
      `Invalid 'end_date': the range ${startDate} to ${endDate} spans ${days} days; at most ${MAX_USAGE_RANGE_DAYS} days can be queried at once.`,
      { param: "end_date", code: "invalid_value" },
    );
  }
  return { startDate, endDate };
}
