const chfFormat = new Intl.NumberFormat("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 6 });
const countFormat = new Intl.NumberFormat("en-US");

/** CHF amounts keep up to 6 decimals: a single small request costs fractions of a centime. */
export const chf = (amount) => `CHF ${chfFormat.format(amount ?? 0)}`;
export const count = (n) => countFormat.format(n ?? 0);

/** "2026-11-25 13:04 UTC", or a dash for null. */
export function dateTime(iso) {
  if (!iso) return "—";
  return `${iso.slice(0, 10)} ${iso.slice(11, 16)} UTC`;
}

export const date = (iso) => (iso ? iso.slice(0, 10) : "—");

/** YYYY-MM-DD of a Date, in UTC (the billing and usage days are UTC days). */
export const isoDay = (d) => d.toISOString().slice(0, 10);

export function daysAgo(now, n) {
  return new Date(now.getTime() - n * 86_400_000);
}
