/** A Prometheus histogram's `_sum` and `_count`, summed over every label set. */
export type HistogramTotals = { sum: number; count: number };

/**
 * Reads `name`'s `_sum` and `_count` out of a Prometheus text exposition (what `GET /metrics`
 * answers), summed over its label sets; zero for a histogram the text does not hold.
 */
export function histogramTotals(exposition: string, name: string): HistogramTotals {
  const totals = { sum: 0, count: 0 };
  for (const line of exposition.split("\n")) {
    const field = line.startsWith(`${name}_sum`) ? "sum" : line.startsWith(`${name}_count`) ? "count" : null;
    if (field === null) continue;
    // The series name is followed by its labels or a space: `name_sum{...} 1.5` or `name_sum 1.5`.
    const rest = line.slice(name.length + field.length + 1);
    if (rest[0] !== "{" && rest[0] !== " ") continue;
    const value = Number(line.slice(line.lastIndexOf(" ") + 1));
    if (Number.isFinite(value)) totals[field] += value;
  }
  return totals;
}

/** The mean (ms) of what a histogram in seconds observed between two readings; NaN with nothing observed. */
export function meanMsBetween(before: HistogramTotals, after: HistogramTotals): number {
  const count = after.count - before.count;
  return count > 0 ? ((after.sum - before.sum) / count) * 1000 : Number.NaN;
}

/** GET `url` (a /metrics listener) and read `name`'s totals; null when it does not answer. */
export async function readHistogramTotals(url: string, name: string): Promise<HistogramTotals | null> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(5_000) });
    if (!response.ok) return null;
    return histogramTotals(await response.text(), name);
  } catch {
    return null;
  }
}
