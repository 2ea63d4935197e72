import { EVENT_COLUMNS, recordedEventFromRow, type EventRow } from "./recordedEventFromRow.ts";
import type { Queryable, RecordedEvent } from "./types.ts";

export type StreamRead = { version: number; events: RecordedEvent[] };

/**
 * Reads a whole stream in order. With `lock`, the stream row is locked FOR UPDATE first (inside the
 * caller's transaction), which serialises commands on one stream instead of letting them conflict.
 */
export async function readStream(db: Queryable, streamId: string, options: { lock?: boolean } = {}): Promise<StreamRead> {
  const head = await db.query<{ version: string }>(`SELECT version FROM es_streams WHERE stream_id = $1${options.lock ? " FOR UPDATE" : ""}`, [streamId]);
  if (!head.rowCount) return { version: 0, events: [] };
  const rows = await db.query<EventRow>(`SELECT ${EVENT_COLUMNS} FROM es_events e WHERE e.stream_id = $1 ORDER BY e.stream_version`, [streamId]);
  return { version: Number(head.rows[0]!.version), events: rows.rows.map(recordedEventFromRow) };
}
