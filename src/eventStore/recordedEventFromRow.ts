import type { EventMetadata, RecordedEvent } from "./types.ts";

export type EventRow = {
  event_id: string;
  stream_id: string;
  stream_version: string;
  global_position: string;
  transaction_id: string;
  event_type: string;
  schema_version: number;
  data: Record<string, unknown>;
  metadata: EventMetadata;
  recorded_at: Date;
};

export const EVENT_COLUMNS =
  "event_id, stream_id, stream_version, global_position, transaction_id::text AS transaction_id, event_type, schema_version, data, metadata, recorded_at";

export function recordedEventFromRow(row: EventRow): RecordedEvent {
  return {
    eventId: row.event_id,
    streamId: row.stream_id,
    streamVersion: Number(row.stream_version),
    globalPosition: String(row.global_position),
    transactionId: String(row.transaction_id),
    type: row.event_type,
    schemaVersion: row.schema_version,
    data: row.data,
    metadata: row.metadata,
    recordedAt: row.recorded_at,
  };
}
