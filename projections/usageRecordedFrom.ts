import type { RecordedEvent } from "../src/ledger/eventStore/types.ts";
import { UsageRecordedSchema, type UsageRecorded } from "../src/ledger/usageRecordedEvent.ts";

/** The UsageRecorded data of a log event (parsed with the contract schema), or null for other types. */
export function usageRecordedFrom(event: RecordedEvent): UsageRecorded["data"] | null {
  if (event.type !== "UsageRecorded") return null;
  return UsageRecordedSchema.parse({ type: event.type, data: event.data }).data;
}

/**
 * An ISO 8601 UTC time whose date part is the UTC day as written: month 01-12, day 01-28 (valid in
 * every month), hour 00-23. The replay meets one per event: its day is read off the text, not built
 * through a Date.
 */
const PLAIN_UTC_TIME = /^\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|1\d|2[0-8])T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d{3})?Z$/;

/** The UTC day a usage counts for: the day its job finished. */
export function usageDay(usage: UsageRecorded["data"]): string {
  const finishedAt = usage.finishedAt;
  return PLAIN_UTC_TIME.test(finishedAt) ? finishedAt.slice(0, 10) : new Date(finishedAt).toISOString().slice(0, 10);
}

/**
 * The UsageRecorded events of a batch as parallel arrays, for one `unnest(...)` statement:
 * account, day, model, key, prompt, completion, reasoning tokens, cost, finishedAt. Null when the batch
 * has none.
 */
export type UsageColumns = unknown[][];

export function usageColumns(events: RecordedEvent[]): UsageColumns | null {
  const columns: unknown[][] = [[], [], [], [], [], [], [], [], []];
  for (const event of events) {
    const usage = usageRecordedFrom(event);
    if (!usage) continue;
    const row = [
      usage.accountId,
      usageDay(usage),
      usage.model,
      usage.keyId,
      usage.promptTokens,
      usage.completionTokens,
      usage.reasoningTokens,
      usage.costMicroChf,
      usage.finishedAt,
    ];
    for (const [i, value] of row.entries()) columns[i]!.push(value);
  }
  return columns[0]!.length ? columns : null;
}
