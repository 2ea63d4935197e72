import { randomUUID } from "node:crypto";
import { chainEvents } from "./chainEvents.ts";
import { ConcurrencyError } from "./concurrencyError.ts";
import type { AppendResult, ExpectedVersion, NewEvent, Queryable } from "./types.ts";

/**
 * Appends events to one stream. Run it inside the caller's transaction (so inline read models change
 * atomically with it); it never raises a database error for a version conflict, it throws
 * ConcurrencyError and leaves the transaction usable for a rollback.
 *
 * - Optimistic concurrency: the stream must be at `expected` (0 / "no_stream": must not exist).
 * - Idempotent: when the first event's id is already stored, nothing is appended.
 * - Tamper evidence: each event's hash chains to the previous one of the stream (eventHash); the stream
 *   row keeps the head hash, locked by the first query, so two appends never chain from the same head.
 *
 * Two round trips: one reads the idempotency check and the locked stream head, one writes the stream
 * row and the events.
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

  const found = await db.query<{ existing_version: string | null; head: string[] | null }>({
    name: "es-append-head-v1",
    text: HEAD_SQL,
    values: [streamId, withIds[0]!.eventId],
  });
  const { existing_version: existingVersion, head } = found.rows[0]!;
  if (existingVersion !== null) return { nextVersion: Number(existingVersion), appended: false };

  const currentVersion = head ? Number(head[0]) : 0;
  if (expected !== "any" && (expected === "no_stream" ? 0 : expected) !== currentVersion) throw new ConcurrencyError(streamId, String(expected));

  // recorded_at is set here (millisecond precision, exactly what the database stores and returns), so the
  // hash covers the time without reading the row back.
  const recordedAt = new Date().toISOString();
  const rows = chainEvents(streamId, currentVersion, head ? (head[1] ?? null) : null, withIds, recordedAt);

  const written = await db.query({
    name: head ? "es-append-existing-v1" : "es-append-new-v1",
    text: head ? APPEND_TO_EXISTING_SQL : APPEND_TO_NEW_SQL,
    values: [
      streamId,
      streamType,
      currentVersion + withIds.length,
      rows.at(-1)!.hash,
      rows.map((r) => r.streamVersion),
      rows.map((r) => r.eventId),
      rows.map((r) => r.type),
      rows.map((r) => r.schemaVersion),
      rows.map((r) => r.data),
      rows.map((r) => r.metadata),
      rows.map((r) => r.prevHash),
      rows.map((r) => r.hash),
      recordedAt,
      currentVersion,
    ],
  });
  // Only when the stream moved after the head was read: created concurrently (there was no row to lock),
  // or appended to by a caller outside a transaction. "any" reads the new head and tries again.
  if (!written.rowCount) {
    if (expected === "any") return appendToStream(db, streamId, streamType, withIds, expected);
    throw new ConcurrencyError(streamId, String(expected));
  }
  return { nextVersion: currentVersion + withIds.length, appended: true };
}

/**
 * $1 stream id, $2 first event id. The head comes back as one array read under the row lock (a second
 * subquery would read the stream row from the statement's snapshot, before a concurrent append).
 */
const HEAD_SQL = `
SELECT (SELECT s.version::text FROM es_events e JOIN es_streams s USING (stream_id) WHERE e.event_id = $2) AS existing_version,
       (SELECT ARRAY[version::text, encode(head_hash, 'hex')] FROM es_streams WHERE stream_id = $1 FOR UPDATE) AS head`;

const INSERT_EVENTS = `
INSERT INTO es_events (stream_id, stream_version, event_id, event_type, schema_version, data, metadata, recorded_at, prev_hash, hash)
SELECT $1, e.v, e.id, e.t, e.sv, e.d::jsonb, e.m::jsonb, $13::timestamptz, decode(e.p, 'hex'), decode(e.h, 'hex')
  FROM s, unnest($5::bigint[], $6::uuid[], $7::text[], $8::int[], $9::text[], $10::text[], $11::text[], $12::text[]) AS e(v, id, t, sv, d, m, p, h)`;

/** Moves the head from version $14 (the one read, locked by HEAD_SQL inside a transaction) to $3. */
const APPEND_TO_EXISTING_SQL = `
WITH s AS (UPDATE es_streams SET version = $3, head_hash = decode($4, 'hex') WHERE stream_id = $1 AND version = $14 RETURNING $2::text AS stream_type)
${INSERT_EVENTS}`;

/** Nothing was there to lock: a concurrent creator wins the insert and this one writes nothing. */
const APPEND_TO_NEW_SQL = `
WITH s AS (INSERT INTO es_streams (stream_id, stream_type, version, head_hash) VALUES ($1, $2, $3, decode($4, 'hex'))
           ON CONFLICT (stream_id) DO NOTHING RETURNING $14::bigint AS from_version)
${INSERT_EVENTS}`;
