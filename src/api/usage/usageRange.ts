import { InvalidRequestError } from "../http/errors.ts";
import { billingPeriod } from "../../ledger/budget/billingPeriod.ts";
import { MAX_USAGE_RANGE_DAYS, type UsageQuery } from "./usageQuerySchema.ts";

export type UsageRange = { startDate: string; endDate: string };

const DAY_MS = 86_400_000;
const dayNumber = (date: string) => Date.parse(`${date}T00:00:00.000Z`) / DAY_MS;
const dateOfDay = (day: number) => new Date(day * DAY_MS).toISOString().slice(0, 10);
const periodOf = (date: string) => billingPeriod(new Date(`${date}T00:00:00.000Z`));

/**
 * The inclusive day range of a usage query. Neither date: the current billing period. One date: the other
 * reaches the current period's far end, or that date's own month's when it lies beyond the current
 * period, and at most MAX_USAGE_RANGE_DAYS days in all (a range the client did not ask for is never
 * refused: `start_date` alone before last year's was a 400 about an `end_date` it had not sent). Both: a
 * 400 naming `end_date` when it is before `start_date` or the range spans more than 366 days.
 */
export function usageRange(query: UsageQuery, now: Date): UsageRange {
  const period = billingPeriod(now);
  const longest = MAX_USAGE_RANGE_DAYS - 1;
  if (query.start_date !== undefined && query.end_date === undefined) {
    const start = query.start_date;
    const through = Math.max(dayNumber(period.end), dayNumber(periodOf(start).end));
    return { startDate: start, endDate: dateOfDay(Math.min(through, dayNumber(start) + longest)) };
  }
  if (query.end_date !== undefined && query.start_date === undefined) {
    const end = query.end_date;
    const from = Math.min(dayNumber(period.start), dayNumber(periodOf(end).start));
    return { startDate: dateOfDay(Math.max(from, dayNumber(end) - longest)), endDate: end };
  }
  const startDate = query.start_date ?? period.start;
  const endDate = query.end_date ?? period.end;
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
