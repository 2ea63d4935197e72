import { completionStreamId } from "../../../ledger/usageRecordedEvent.ts";
import type { Queryable } from "../../../ledger/eventStore/types.ts";

/**
 * Whether the completion's usage was recorded (it ran and ended): what tells an Idempotency-Key retry
 * whose claim lasts but whose record is gone (COMPLETION_RETENTION_S shorter than IDEMPOTENCY_TTL_S)
 * that the first request ended long ago, not that it is still being admitted. False when PostgreSQL does
 * not answer.
 */
export async function chargedEarlier(pool: Queryable, completionId: string): Promise<boolean> {
  const found = await pool
    .query("SELECT 1 FROM es_events WHERE stream_id = $1 AND event_type = 'UsageRecorded' LIMIT 1", [completionStreamId(completionId)])
    .catch(() => null);
  return (found?.rowCount ?? 0) > 0;
}
