import { randomUUID } from "node:crypto";
import { chainEvents, type ChainedEvent } from "./chainEvents.ts";
import type { NewEvent, Queryable } from "./types.ts";

/** Events to append to a stream that must not exist yet. */
export type NewStreamAppend = { streamId: string; streamType: string; events: NewEvent[] };

/**
 * What became of one stream's append, as appendToStream with expected version "no_stream" would have
 * ended: "appended" (the stream was created with the events), "already_appended" (its first event's id
 * was already stored: nothing appended; appendToStream's `appended: false`) or "stream_exists" (the
 * stream was there, or was created concurrently: nothing appended; appendToStream's ConcurrencyError).
 */
export type NewStreamOutcome = "appended" | "already_appended" | "stream_exists";

/**
 * appendToStream(db, streamId, streamType, events, "no_stream") for many streams in ONE statement, with
 * the same guarantees for each: the idempotency check on its first event id, the stream created only if
 * it does not exist (a concurrent creator wins: its INSERT ... ON CONFLICT DO NOTHING waits for the other
 * transaction and then writes nothing), versions 1.., the hash chain from a null head (chainEvents), the
 * stream's head hash, global positions in the order of `appends` and of each stream's events, all
 * recorded at the same time in the caller's transaction. A version conflict is an outcome, not an error:
 * the transaction stays usable. Each stream may appear once per call (throws otherwise); no append, no
 * statement.
 */
export async function appendToNewStreams(db: Queryable, appends: NewStreamAppend[]): Promise<NewStreamOutcome[]> {
  if (appends.length === 0) return [];
  const streamIds = new Set<string>();
  for (const append of appends) {
    if (append.events.length === 0) throw new Error(`appendToNewStreams needs at least one event for ${append.streamId}`);
    if (streamIds.has(append.streamId)) throw new Error(`appendToNewStreams got stream ${append.streamId} twice`);
    streamIds.add(append.streamId);
  }
  const recordedAt = new Date().toISOString();
  const streams = appends.map((append) => {
    const withIds = append.events.map((e) => ({ ...e, eventId: e.eventId ?? randomUUID() }));
    return { append, rows: chainEvents(append.streamId, 0, null, withIds, recordedAt) };
  });
  const events = streams.flatMap(({ append, rows }) => rows.map((row) => ({ streamId: append.streamId, row })));
  const column = <T>(pick: (row: ChainedEvent) => T) => events.map((e) => pick(e.row));
  const written = await db.query<{ created: string[]; already: string[] }>({
    name: "es-append-new-streams-v1",
    text: APPEND_TO_NEW_STREAMS_SQL,
    values: [
      streams.map((s) => s.append.streamId),
      streams.map((s) => s.append.streamType),
      streams.map((s) => s.rows.length),
      streams.map((s) => s.rows.at(-1)!.hash),
      streams.map((s) => s.rows[0]!.eventId),
      events.map((e) => e.streamId),
      column((r) => r.streamVersion),
      column((r) => r.eventId),
      column((r) => r.type),
      column((r) => r.schemaVersion),
      column((r) => r.data),
      column((r) => r.metadata),
      column((r) => r.prevHash),
      column((r) => r.hash),
      recordedAt,
    ],
  });
  const created = new Set(written.rows[0]!.created);
  const already = new Set(written.rows[0]!.already);
  return appends.map(({ streamId }) => (created.has(streamId) ? "appended" : already.has(streamId) ? "already_appended" : "stream_exists"));
}

/**
 * $1-$5 per stream: id, type, version after the append, head hash, first event id. $6-$14 per event:
 * stream id, version, id, type, schema version, data, metadata (JSON text), previous hash, hash; $15
 * recorded_at. The events are inserted in the order given (ORDER BY n: global positions follow it),
 * only for the streams this statement created.
 */
const APPEND_TO_NEW_STREAMS_SQL = `
WITH input AS (
  SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::uuid[]) AS i(stream_id, stream_type, version, head_hash, first_event_id)
), stored AS (
  SELECT i.stream_id FROM input i WHERE EXISTS (SELECT 1 FROM es_events e WHERE e.event_id = i.first_event_id)
), s AS (
  INSERT INTO es_streams (stream_id, stream_type, version, head_hash)
  SELECT i.stream_id, i.stream_type, i.version, decode(i.head_hash, 'hex') FROM input i
   WHERE i.stream_id NOT IN (SELECT stream_id FROM stored)
   ORDER BY i.stream_id
  ON CONFLICT (stream_id) DO NOTHING
  RETURNING stream_id
), e AS (
  INSERT INTO es_events (stream_id, stream_version, event_id, event_type, schema_version, data, metadata, recorded_at, prev_hash, hash)
  SELECT ev.s, ev.v, ev.id, ev.t, ev.sv, ev.d::jsonb, ev.m::jsonb, $15::timestamptz, decode(ev.p, 'hex'), decode(ev.h, 'hex')
    FROM unnest($6::text[], $7::bigint[], $8::uuid[], $9::text[], $10::int[], $11::text[], $12::text[], $13::text[], $14::text[])
         WITH ORDINALITY AS ev(s, v, id, t, sv, d, m, p, h, n)
   WHERE ev.s IN (SELECT stream_id FROM s)
   ORDER BY ev.n
  RETURNING 1
)
SELECT ARRAY(SELECT stream_id FROM s) AS created, ARRAY(SELECT stream_id FROM stored) AS already, (SELECT count(*) FROM e) AS events`;
