import { EVENT_COLUMNS, recordedEventFromRow, type EventRow } from "./recordedEventFromRow.ts";
import type { Queryable, RecordedEvent } from "./types.ts";

/** A position in the global log: events are ordered by (transactionId, globalPosition). */
export type LogPosition = { transactionId: string; globalPosition: string };

export const LOG_START: LogPosition = { transactionId: "0", globalPosition: "0" };

/**
 * Reads the next batch of the whole log after `after`, in commit-safe order. Only events of
 * transactions older than every transaction still in flight are returned
 * (transaction_id < pg_snapshot_xmin), so a reader never moves past a slow transaction whose events
 * would later appear behind its position.
 */
export async function readAll(db: Queryable, after: LogPosition, limit = 500): Promise<RecordedEvent[]> {
  const rows = await db.query<EventRow>(
    `SELECT ${EVENT_COLUMNS} FROM es_events
     WHERE (transaction_id, global_position) > ($1::xid8, $2::bigint)
       AND transaction_id < pg_snapshot_xmin(pg_current_snapshot())
     ORDER BY transaction_id, global_position
     LIMIT $3`,
    [after.transactionId, after.globalPosition, limit],
  );
  return rows.rows.map(recordedEventFromRow);
}

export function positionOf(event: RecordedEvent): LogPosition {
  return { transactionId: event.transactionId, globalPosition: event.globalPosition };
}
