/** A billing period: one calendar month in UTC. Dates are `YYYY-MM-DD`. */
export type BillingPeriod = {
  /** First day of the month. */
  start: string;
  /** Last day of the month (inclusive). */
  end: string;
  /** First day of the next month: when usage resets. */
  nextStart: string;
};

const isoDate = (year: number, monthIndex: number, day: number) => new Date(Date.UTC(year, monthIndex, day)).toISOString().slice(0, 10);

/** The billing period (calendar month, UTC) that contains `at`. */
export function billingPeriod(at: Date): BillingPeriod {
  const year = at.getUTCFullYear();
  const month = at.getUTCMonth();
  return { start: isoDate(year, month, 1), end: isoDate(year, month + 1, 0), nextStart: isoDate(year, month + 1, 1) };
}
