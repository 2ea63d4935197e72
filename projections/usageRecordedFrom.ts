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
