import { EVENT_COLUMNS, recordedEventFromRow, type EventRow } from "./recordedEventFromRow.ts";
import type { LogPosition } from "./logPosition.ts";
import type { Queryable, RecordedEvent } from "./types.ts";

/**
 * Reads the next batch of the whole log after `after`, in commit-safe order. Only events of
 * transactions older than every transaction still in flight are returned
 * (transaction_id < pg_snapshot_xmin), so a reader never moves past a slow transaction whose events
 * would later appear behind its position.
 */
export async function readAll(db: Queryable, after: LogPosition, limit = 500): Promise<RecordedEvent[]> {
  return readLog(db, after, limit, "committed-before-every-open-transaction");
}

/**
 * Reads the next batch of every event the caller's snapshot sees, in log order, without the in-flight
 * bound of readAll. Only for a reader inside one REPEATABLE READ transaction that reads the log to its
 * end at one instant (the replay): a follower of the live log must use readAll.
 */
export async function readAllInSnapshot(db: Queryable, after: LogPosition, limit = 500): Promise<RecordedEvent[]> {
  return readLog(db, after, limit, "whole-snapshot");
}

async function readLog(
  db: Queryable,
  after: LogPosition,
  limit: number,
  bound: "committed-before-every-open-transaction" | "whole-snapshot",
): Promise<RecordedEvent[]> {
  const rows = await db.query<EventRow>(
    `SELECT ${EVENT_COLUMNS} FROM es_events e
     WHERE (e.transaction_id, e.global_position) > ($1::xid8, $2::bigint)
       ${bound === "whole-snapshot" ? "" : "AND e.transaction_id < pg_snapshot_xmin(pg_current_snapshot())"}
     ORDER BY e.transaction_id, e.global_position
     LIMIT $3`,
    [after.transactionId, after.globalPosition, limit],
  );
  return rows.rows.map(recordedEventFromRow);
}
