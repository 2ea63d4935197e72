import type { RecordedEvent } from "../src/ledger/eventStore/types.ts";
import { UsageRecordedSchema, type UsageRecorded } from "../src/ledger/usageRecordedEvent.ts";

/** The UsageRecorded data of a log event (parsed with the contract schema), or null for other types. */
export function usageRecordedFrom(event: RecordedEvent): UsageRecorded["data"] | null {
  if (event.type !== "UsageRecorded") return null;
  return UsageRecordedSchema.parse({ type: event.type, data: event.data }).data;
}

/** The UTC day a usage counts for: the day its job finished. */
export function usageDay(usage: UsageRecorded["data"]): string {
  return new Date(usage.finishedAt).toISOString().slice(0, 10);
}

/**
 * The UsageRecorded events of a batch as parallel arrays, for one `unnest(...)` statement:
 * account, day, model, key, prompt, completion, reasoning tokens, cost, finishedAt. Null when the batch
 * has none.
 */
export function usageColumns(events: RecordedEvent[]): unknown[][] | null {
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
