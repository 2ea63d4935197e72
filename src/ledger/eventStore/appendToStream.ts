import { randomUUID } from "node:crypto";
import { ConcurrencyError } from "./concurrencyError.ts";
import type { AppendResult, ExpectedVersion, NewEvent, Queryable } from "./types.ts";

/**
 * Appends events to one stream. Run it inside the caller's transaction (so inline read models change
 * atomically with it); it never raises a database error for a version conflict, it throws
 * ConcurrencyError and leaves the transaction usable for a rollback.
 *
 * - Optimistic concurrency: the stream must be at `expected` (0 / "no_stream": must not exist).
 * - Idempotent: when the first event's id is already stored, nothing is appended.
 */
export async function appendToStream(
  db: Queryable,
  streamId: string,
  streamType: string,
  events: NewEvent[],
  expected: ExpectedVersion,
): Promise<AppendResult> {
  if (events.length === 0) throw new Error("appendToStream needs at least one event");
  const withIds = events.map((e) => ({ ...e, eventId: e.eventId ?? randomUUID() }));

  const existing = await db.query<{ version: string }>(`SELECT s.version FROM es_events e JOIN es_streams s USING (stream_id) WHERE e.event_id = $1`, [
    withIds[0]!.eventId,
  ]);
  if (existing.rowCount) return { nextVersion: Number(existing.rows[0]!.version), appended: false };

  const count = withIds.length;
  let startVersion: number;
  if (expected === "any") {
    const row = await db.query<{ version: string }>(
      `INSERT INTO es_streams (stream_id, stream_type, version) VALUES ($1, $2, $3)
       ON CONFLICT (stream_id) DO UPDATE SET version = es_streams.version + $3
       RETURNING version`,
      [streamId, streamType, count],
    );
    startVersion = Number(row.rows[0]!.version) - count;
  } else if (expected === "no_stream" || expected === 0) {
    const row = await db.query(`INSERT INTO es_streams (stream_id, stream_type, version) VALUES ($1, $2, $3) ON CONFLICT (stream_id) DO NOTHING`, [
      streamId,
      streamType,
      count,
    ]);
    if (!row.rowCount) throw new ConcurrencyError(streamId, String(expected));
    startVersion = 0;
  } else {
    const row = await db.query(`UPDATE es_streams SET version = version + $3 WHERE stream_id = $1 AND version = $2`, [streamId, expected, count]);
    if (!row.rowCount) throw new ConcurrencyError(streamId, String(expected));
    startVersion = expected;
  }

  const values: unknown[] = [];
  const tuples = withIds.map((event, i) => {
    const base = i * 6;
    values.push(streamId, startVersion + i + 1, event.eventId, event.type, event.schemaVersion ?? 1, JSON.stringify(event.data));
    return `($${base + 1}, $${base + 2}, $${base + 3}, $${base + 4}, $${base + 5}, $${base + 6}::jsonb, $${count * 6 + 1 + i}::jsonb)`;
  });
  for (const event of withIds) values.push(JSON.stringify(event.metadata ?? {}));
  await db.query(
    `INSERT INTO es_events (stream_id, stream_version, event_id, event_type, schema_version, data, metadata)
     VALUES ${tuples.join(", ")}`,
    values,
  );
  return { nextVersion: startVersion + count, appended: true };
}
