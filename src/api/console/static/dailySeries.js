const DAY_MS = 86_400_000;

/** One point per UTC day from the usage answer's start_date to its end_date, zero where it has no row. */
export function dailySeries(usage) {
  const byDate = new Map(usage.data.map((row) => [row.date, row]));
  const days = [];
  for (let t = Date.parse(`${usage.start_date}T00:00:00Z`); t <= Date.parse(`${usage.end_date}T00:00:00Z`); t += DAY_MS) {
    const day = new Date(t).toISOString().slice(0, 10);
    days.push({ day, t: t / 1000, cost: byDate.get(day)?.cost_chf ?? 0, requests: byDate.get(day)?.requests ?? 0 });
  }
  return days;
}

/** Decimals that tell an axis's ticks apart (2 for francs, up to 6 for micro-CHF steps). */
export function axisDecimals(ticks) {
  const step = ticks.length > 1 ? Math.abs(ticks[1] - ticks[0]) : Math.abs(ticks[0] ?? 1);
  if (!(step > 0)) return 2;
  return Math.min(6, Math.max(2, Math.ceil(-Math.log10(step))));
}

/**
 * The chart's dates (uPlot's `tzDate`): a Date whose local fields are the UTC fields of `ts` (Unix
 * seconds), so the axis names the UTC days the bars are (a browser west of UTC read each bar as the day
 * before), as uPlot.tzDate(date, "Etc/UTC") does.
 */
export function utcCalendarDate(ts) {
  const d = new Date(ts * 1000);
  return new Date(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate(), d.getUTCHours(), d.getUTCMinutes(), d.getUTCSeconds(), d.getUTCMilliseconds());
}
