import type { Queryable } from "../../src/ledger/eventStore/types.ts";
import { eventHash } from "../../src/ledger/eventStore/eventHash.ts";
import { AUDIT_CHECKPOINT_STREAM } from "../../src/ledger/audit/auditCheckpoint.ts";
import type { AuditFinding } from "./auditFinding.ts";

/** One event row as the verifier reads it. */
export type ChainRow = {
  stream_id: string;
  stream_version: string;
  event_id: string;
  event_type: string;
  schema_version: number;
  data: Record<string, unknown>;
  metadata: Record<string, unknown>;
  /** ISO 8601 UTC with milliseconds, as the hash covers it (formatted by PostgreSQL: no Date per row). */
  recorded_at: string;
  prev_hash: string | null;
  hash: string | null;
  /** Its place in the log (transaction id, global position), as text. */
  tx: string;
  gp: string;
  /** Whether recorded_at has a fraction of a millisecond (the hash covers milliseconds only; the service stores none). */
  sub_ms: boolean;
};

type StreamRow = { stream_id: string; version: string; head_hash: string | null; legacy_seal: string | null };

export type ChainStats = { events: number; streams: number; preChainEvents: number };

/** Per stream: what the walk has seen so far (only the current stream is held). */
type StreamWalk = {
  streamId: string;
  head: StreamRow | undefined;
  lastVersion: number;
  lastHash: string | null;
  /** Version of each hash seen in this stream, to tell a reordered event from an edited one. */
  versionOfHash: Map<string, number>;
  /** The log position of the stream's last event seen. */
  lastTx: string | null;
  lastGp: bigint;
};

/**
 * Walks every stream in (stream_id, stream_version) order in batches (constant memory: one stream's
 * hashes at a time) and checks, for each event: its stored hash is the hash of its content and its
 * stored previous hash; the previous hash is the hash of the event before it (or the stream's legacy
 * seal, or none for version 1); versions run 1, 2, 3 ... with no gap; and the stream row's version and
 * head hash are those of the last event; and that no stream row with a version has lost every event
 * (the walk, which follows es_events, never meets such a stream). `onEvent` sees every event (the
 * charge check uses it). `streamFilter`: only these streams (null: all).
 */
export async function verifyChains(
  db: Queryable,
  streamFilter: string[] | null,
  report: (finding: AuditFinding) => void,
  onEvent: (row: ChainRow) => void = () => undefined,
  batchSize = 5000,
): Promise<ChainStats> {
  const stats = await walkChains(db, { streamFilter, checkpoints: "exclude" }, report, onEvent, batchSize);
  await reportEmptiedStreams(db, streamFilter, report);
  // Checkpoint events are large (each lists up to 10,000 stream heads): one at a time, so a batch never
  // holds many of them and memory stays bounded whatever the size of the log.
  if (streamFilter && !streamFilter.includes(AUDIT_CHECKPOINT_STREAM)) return stats;
  const checkpoints = await walkChains(db, { streamFilter: null, checkpoints: "only" }, report, onEvent, 1);
  return {
    events: stats.events + checkpoints.events,
    streams: stats.streams + checkpoints.streams,
    preChainEvents: stats.preChainEvents + checkpoints.preChainEvents,
  };
}

/**
 * Stream rows at a version above 0 with no event left (every event removed, the row kept: a completion
 * stream has one event): a stream-head finding each, of the streams in `streamFilter` (null: all).
 */
async function reportEmptiedStreams(db: Queryable, streamFilter: string[] | null, report: (finding: AuditFinding) => void): Promise<void> {
  const rows = await db.query<{ stream_id: string; version: string }>(
    `SELECT s.stream_id, s.version FROM es_streams s
      WHERE s.version > 0 AND NOT EXISTS (SELECT 1 FROM es_events e WHERE e.stream_id = s.stream_id)
            ${streamFilter ? "AND s.stream_id = ANY($1::text[])" : ""}
      ORDER BY s.stream_id`,
    streamFilter ? [streamFilter] : [],
  );
  for (const row of rows.rows) {
    const version = Number(row.version);
    report({
      kind: "stream-head",
      streamId: row.stream_id,
      version,
      message: `the stream is at version ${version} but has no event left (events removed)`,
    });
  }
}

async function walkChains(
  db: Queryable,
  selection: { streamFilter: string[] | null; checkpoints: "exclude" | "only" },
  report: (finding: AuditFinding) => void,
  onEvent: (row: ChainRow) => void,
  batchSize: number,
): Promise<ChainStats> {
  const { streamFilter } = selection;
  const stats: ChainStats = { events: 0, streams: 0, preChainEvents: 0 };
  let walk: StreamWalk | null = null;
  // The stream rows are bounded below too (s.stream_id >= $1): without it the merge join reads
  // es_streams from its start for every batch, and the walk slows down as the log grows.
  const fetchAfter = (after: [string, number]) =>
    db.query<ChainRow & { head_version: string | null; head_hash: string | null; legacy_seal: string | null }>(
      `SELECT e.stream_id, e.stream_version, e.event_id, e.event_type, e.schema_version, e.data, e.metadata,
              to_char(e.recorded_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS recorded_at,
              e.transaction_id::text AS tx, e.global_position::text AS gp, e.recorded_at <> date_trunc('milliseconds', e.recorded_at) AS sub_ms,
              encode(e.prev_hash, 'hex') AS prev_hash, encode(e.hash, 'hex') AS hash,
              s.version AS head_version, encode(s.head_hash, 'hex') AS head_hash, encode(s.legacy_seal, 'hex') AS legacy_seal
         FROM es_events e LEFT JOIN es_streams s ON s.stream_id = e.stream_id AND s.stream_id >= $1
        WHERE (e.stream_id, e.stream_version) > ($1, $2) AND e.stream_id ${selection.checkpoints === "only" ? "=" : "<>"} $4
              ${streamFilter ? "AND e.stream_id = ANY($5::text[])" : ""}
        ORDER BY e.stream_id, e.stream_version LIMIT $3`,
      streamFilter ? [after[0], after[1], batchSize, AUDIT_CHECKPOINT_STREAM, streamFilter] : [after[0], after[1], batchSize, AUDIT_CHECKPOINT_STREAM],
    );
  let next = fetchAfter(["", 0]);
  for (;;) {
    const { rows } = await next;
    if (rows.length === 0) break;
    // The next batch is read while this one is hashed.
    const last = rows.at(-1)!;
    next = fetchAfter([last.stream_id, Number(last.stream_version)]);
    next.catch(() => undefined); // awaited on the next turn; this only keeps a failure from going unhandled meanwhile
    for (const row of rows) {
      if (!walk || walk.streamId !== row.stream_id) {
        if (walk) finishStream(walk, report);
        const head =
          row.head_version === null
            ? undefined
            : { stream_id: row.stream_id, version: row.head_version, head_hash: row.head_hash, legacy_seal: row.legacy_seal };
        walk = { streamId: row.stream_id, head, lastVersion: 0, lastHash: null, versionOfHash: new Map(), lastTx: null, lastGp: 0n };
        stats.streams++;
      }
      stats.events++;
      if (row.hash === null) stats.preChainEvents++;
      checkEvent(walk, row, report);
      onEvent(row);
    }
  }
  if (walk) finishStream(walk, report);
  return stats;
}

function checkEvent(walk: StreamWalk, row: ChainRow, report: (finding: AuditFinding) => void): void {
  const version = Number(row.stream_version);
  const at = { kind: "chain" as const, streamId: row.stream_id, version };
  if (version !== walk.lastVersion + 1) {
    const missing = version - walk.lastVersion - 1;
    report({
      ...at,
      message: `version ${walk.lastVersion + 1}${missing > 1 ? `..${version - 1}` : ""} missing (the stream jumps from ${walk.lastVersion} to ${version})`,
    });
  }
  // Events one transaction appends to a stream take log positions in version order: within a
  // transaction, a later version never comes first in the log (across transactions the order of
  // transaction ids need not follow versions; a checkpoint's count of its window covers those).
  const gp = BigInt(row.gp);
  if (walk.lastTx === row.tx && gp <= walk.lastGp) {
    report({ ...at, message: `logged before version ${walk.lastVersion} of its stream in the same transaction (the log order was changed)` });
  }
  walk.lastTx = row.tx;
  walk.lastGp = gp;
  if (row.hash === null) {
    if (walk.lastHash !== null) report({ ...at, message: "event has no hash after the chain began (inserted)" });
    walk.lastVersion = version;
    return;
  }
  if (row.sub_ms) report({ ...at, message: "recorded_at has a fraction of a millisecond that no event is recorded with (recorded_at changed)" });
  const fields = {
    prevHash: row.prev_hash,
    streamId: row.stream_id,
    streamVersion: version,
    eventId: row.event_id,
    type: row.event_type,
    schemaVersion: row.schema_version,
    data: row.data,
    metadata: row.metadata,
    recordedAt: row.recorded_at,
  };
  const expectedPrev = walk.lastHash ?? (walk.lastVersion > 0 || version > 1 ? (walk.head?.legacy_seal ?? null) : null);
  if (eventHash(fields) !== row.hash) {
    const movedFrom = originalVersion(walk, row, version, (v) => eventHash({ ...fields, streamVersion: v }) === row.hash);
    if (movedFrom !== undefined) {
      report({ ...at, message: `event ${row.event_id} was recorded as version ${movedFrom} and now sits at version ${version} (reordered)` });
    } else {
      report({ ...at, message: `stored hash does not match the event's content (type, data, metadata, version or recorded_at changed)` });
    }
  } else if (row.prev_hash !== expectedPrev) {
    const linkedTo = row.prev_hash ? walk.versionOfHash.get(row.prev_hash) : undefined;
    report({
      ...at,
      message:
        linkedTo !== undefined
          ? `chained to version ${linkedTo}, not to the event before it (reordered)`
          : "previous-hash link broken: the event before it was changed, removed or replaced",
    });
  }
  walk.versionOfHash.set(row.hash, version);
  walk.lastVersion = version;
  walk.lastHash = row.hash;
}

/**
 * The version an event whose hash does not match was recorded at, if only its version changed: the one
 * after the event its previous hash names, or else one nearby (the events it followed may come later).
 */
function originalVersion(walk: StreamWalk, row: ChainRow, version: number, matches: (v: number) => boolean): number | undefined {
  const linked = row.prev_hash === null ? 0 : walk.versionOfHash.get(row.prev_hash);
  const candidates = linked !== undefined ? [linked + 1] : [];
  for (let d = 1; d <= 16; d++) candidates.push(version + d, version - d);
  return candidates.find((v) => v >= 1 && v !== version && matches(v));
}

function finishStream(walk: StreamWalk, report: (finding: AuditFinding) => void): void {
  const at = { kind: "stream-head" as const, streamId: walk.streamId };
  if (!walk.head) {
    report({ ...at, message: "events without a stream row" });
    return;
  }
  const headVersion = Number(walk.head.version);
  if (headVersion !== walk.lastVersion) {
    report({
      ...at,
      version: headVersion,
      message: `the stream is at version ${headVersion} but its last event is version ${walk.lastVersion} (events removed)`,
    });
  } else if (walk.lastHash !== null && walk.head.head_hash !== walk.lastHash) {
    report({ ...at, version: headVersion, message: "the stream's head hash is not the hash of its last event" });
  }
}
