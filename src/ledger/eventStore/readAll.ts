import { EVENT_COLUMNS, recordedEventFromRow, type EventRow } from "./recordedEventFromRow.ts";
import type { LogPosition } from "./logPosition.ts";
import type { Queryable, RecordedEvent } from "./types.ts";

/**
 * Stored bytes (data and metadata, as pg_column_size counts them) after which a batch takes no further
 * event: a batch of large events (audit checkpoints list up to 10,000 stream heads each) is cut short, so
 * a reader's memory does not grow with how many of them sit next to each other in the log.
 */
export const MAX_BATCH_BYTES = 4 * 1024 * 1024;

/**
 * Reads the next batch of the whole log after `after`, in commit-safe order. Only events of
 * transactions older than every transaction still in flight are returned
 * (transaction_id < pg_snapshot_xmin), so a reader never moves past a slow transaction whose events
 * would later appear behind its position. At most `limit` events; no event after the first `maxBytes`
 * (a batch has at least one event, however large).
 */
export async function readAll(db: Queryable, after: LogPosition, limit = 500, maxBytes = MAX_BATCH_BYTES): Promise<RecordedEvent[]> {
  return readLog(db, after, limit, maxBytes, "committed-before-every-open-transaction");
}

/**
 * Reads the next batch of every event the caller's snapshot sees, in log order, without the in-flight
 * bound of readAll. Only for a reader inside one REPEATABLE READ transaction that reads the log to its
 * end at one instant (the replay): a follower of the live log must use readAll.
 */
export async function readAllInSnapshot(db: Queryable, after: LogPosition, limit = 500, maxBytes = MAX_BATCH_BYTES): Promise<RecordedEvent[]> {
  return readLog(db, after, limit, maxBytes, "whole-snapshot");
}

async function readLog(
  db: Queryable,
  after: LogPosition,
  limit: number,
  maxBytes: number,
  bound: "committed-before-every-open-transaction" | "whole-snapshot",
): Promise<RecordedEvent[]> {
  // The running size is computed on the (possibly compressed) stored values, without reading them out;
  // the events past the budget are dropped before their data is sent.
  const rows = await db.query<EventRow>(
    `SELECT ${EVENT_COLUMNS} FROM (
       SELECT e.*, sum(pg_column_size(e.data) + pg_column_size(e.metadata))
                     OVER (ORDER BY e.transaction_id, e.global_position ROWS UNBOUNDED PRECEDING) AS running_bytes,
              pg_column_size(e.data) + pg_column_size(e.metadata) AS own_bytes
         FROM es_events e
        WHERE (e.transaction_id, e.global_position) > ($1::xid8, $2::bigint)
          ${bound === "whole-snapshot" ? "" : "AND e.transaction_id < pg_snapshot_xmin(pg_current_snapshot())"}
        ORDER BY e.transaction_id, e.global_position
        LIMIT $3) e
     WHERE e.running_bytes - e.own_bytes <= $4
     ORDER BY e.transaction_id, e.global_position`,
    [after.transactionId, after.globalPosition, limit, maxBytes],
  );
  return rows.rows.map(recordedEventFromRow);
}
