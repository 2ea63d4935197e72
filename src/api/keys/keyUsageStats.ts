import type { Queryable } from "../../ledger/eventStore/types.ts";

export const USAGE_WINDOW_DAYS = 30;

export type KeyUsageDay = { date: string; requests: number; costMicroChf: number };
export type KeyUsage = { totalRequests: number; totalCostMicroChf: number; last30Days: KeyUsageDay[] };

/** The UTC dates of the window ending with `now`'s day, oldest first (`YYYY-MM-DD`). */
export function usageWindowDates(now: Date, days = USAGE_WINDOW_DAYS): string[] {
  const today = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate());
  return Array.from({ length: days }, (_, i) => new Date(today - (days - 1 - i) * 86_400_000).toISOString().slice(0, 10));
}

/**
 * Usage stats per key, the one place key views read them from. `last30Days` always has 30 entries,
 * one per UTC day ending today, oldest first, zero-filled on days without use (so clients can chart it
 * without gap handling).
 *
 * Read from rm_key_usage_daily (built by the projector from UsageRecorded, per key and UTC day of the
 * job's finish): totals over every day, and the days of the window.
 */
export async function keyUsageStats(db: Queryable, keyIds: readonly string[], now: Date): Promise<Map<string, KeyUsage>> {
  const dates = usageWindowDates(now);
  const stats = new Map<string, KeyUsage>();
  const windowed = new Map<string, Map<string, { requests: number; costMicroChf: number }>>();
  for (const keyId of keyIds) {
    stats.set(keyId, { totalRequests: 0, totalCostMicroChf: 0, last30Days: [] });
    windowed.set(keyId, new Map());
  }
  if (keyIds.length) {
    const rows = await db.query<{ key_id: string; day_text: string; requests: string; cost: string }>(
      `SELECT key_id, day::text AS day_text, requests, cost_micro_chf AS cost FROM rm_key_usage_daily WHERE key_id = ANY($1::text[])`,
      [[...keyIds]],
    );
    for (const row of rows.rows) {
      const key = stats.get(row.key_id)!;
      key.totalRequests += Number(row.requests);
      key.totalCostMicroChf += Number(row.cost);
      windowed.get(row.key_id)!.set(row.day_text, { requests: Number(row.requests), costMicroChf: Number(row.cost) });
    }
  }
  for (const [keyId, key] of stats) {
    const days = windowed.get(keyId)!;
    key.last30Days = dates.map((date) => ({ date, requests: days.get(date)?.requests ?? 0, costMicroChf: days.get(date)?.costMicroChf ?? 0 }));
  }
  return stats;
}
