import type { EventMetadata, RecordedEvent } from "./types.ts";

export type EventRow = {
  event_id: string;
  stream_id: string;
  stream_version: string;
  global_position_text: string;
  transaction_id_text: string;
  event_type: string;
  schema_version: number;
  data: Record<string, unknown>;
  metadata: EventMetadata;
  recorded_at: Date;
};

/**
 * The columns of an event row, for `SELECT ${EVENT_COLUMNS} FROM es_events e`.
 *
 * The numeric positions come back as text (JavaScript numbers cannot hold every xid8 or bigint) under
 * names of their own: an alias that reused `transaction_id` would shadow the xid8 column in an
 * ORDER BY (PostgreSQL resolves a bare ORDER BY name to the output column first) and sort the log as
 * text ("10000" < "9999"). Order and filter on `e.transaction_id, e.global_position`, never on these.
 */
export const EVENT_COLUMNS =
  "e.event_id, e.stream_id, e.stream_version, e.global_position::text AS global_position_text, e.transaction_id::text AS transaction_id_text, e.event_type, e.schema_version, e.data, e.metadata, e.recorded_at";

export function recordedEventFromRow(row: EventRow): RecordedEvent {
  return {
    eventId: row.event_id,
    streamId: row.stream_id,
    streamVersion: Number(row.stream_version),
    globalPosition: row.global_position_text,
    transactionId: row.transaction_id_text,
    type: row.event_type,
    schemaVersion: row.schema_version,
    data: row.data,
    metadata: row.metadata,
    recordedAt: row.recorded_at,
  };
}
