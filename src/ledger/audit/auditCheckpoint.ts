import { z } from "zod";
import type { Pool } from "../../db/createPool.ts";
import { withTransaction } from "../../db/withTransaction.ts";
import { appendToStream } from "../eventStore/appendToStream.ts";
import { LOG_START, type LogPosition } from "../eventStore/logPosition.ts";
import type { Queryable } from "../eventStore/types.ts";
import { accountLeaves, accountsRoot, streamAccountsIn } from "./accountsRoot.ts";
import { CheckpointSignatureSchema, type CheckpointSigner, checkpointStatement } from "./checkpointSignature.ts";
import { merkleRoot, type StreamHead } from "./merkleRoot.ts";

export const AUDIT_CHECKPOINT_STREAM = "audit-checkpoints";
export const AUDIT_CHECKPOINT_STREAM_TYPE = "audit";
/** Advisory lock (one key) held by the transaction that writes a checkpoint: one writer at a time. */
const CHECKPOINT_LOCK_KEY = 727_102;
/** Events one checkpoint covers at most, so its list of heads stays small; a backlog takes several. */
export const CHECKPOINT_MAX_EVENTS = 10_000;

const LogPositionSchema = z.object({ transactionId: z.string(), globalPosition: z.string() });

/**
 * AuditCheckpointRecorded: the heads of every stream that changed in the log window (after, upTo] (log
 * order, only transactions older than every one in flight, so no later commit lands inside a window;
 * at most CHECKPOINT_MAX_EVENTS events), and their Merkle root. Checkpoints are chained like every
 * stream; the next one starts at `upTo`. `accountsRoot` commits to which of those streams belong to which
 * account (accountsRoot.ts; the per-account leaves are recomputed from the log when needed, not stored). `signature` (when the projector has a signing key): Ed25519
 * over checkpointStatement(), which no one without the key can recompute after a rewrite.
 */
export const AuditCheckpointRecordedDataSchema = z.object({
  after: LogPositionSchema,
  upTo: LogPositionSchema,
  eventCount: z.number().int().positive(),
  streamCount: z.number().int().nonnegative(),
  merkleRoot: z.string(),
  /** accountsRoot() of the window (audit-checkpoint/2); absent in checkpoints written before it. */
  accountsRoot: z.string().optional(),
  heads: z.array(z.tuple([z.string(), z.number().int().positive(), z.string()])),
  signature: CheckpointSignatureSchema.optional(),
});
export type AuditCheckpointRecordedData = z.infer<typeof AuditCheckpointRecordedDataSchema>;

/**
 * The head of a stream as a checkpoint records it: the hash of the last event in the window, or for a
 * stream whose last event predates the hash chain, its legacy seal prefixed "legacy:".
 */
export const HEAD_HASH_SQL = "coalesce(encode(e.hash, 'hex'), 'legacy:' || encode(s.legacy_seal, 'hex'))";

export type CheckpointOptions = {
  /** Events one checkpoint covers at most (CHECKPOINT_MAX_EVENTS). */
  maxEvents?: number;
  /** Write nothing while fewer settled events than this are uncovered (1: any). */
  minEvents?: number;
  /** Signs each checkpoint; without it checkpoints are unsigned (weaker: see docs/audit.md). */
  signer?: CheckpointSigner | null;
};

/**
 * Writes the next checkpoint (the projector calls it periodically). Returns null when another writer
 * holds the lock or fewer than `minEvents` (default 1) events changed since the last checkpoint. A
 * checkpoint of `maxEvents` events may have left more behind: call again (writeAuditCheckpoints does).
 */
export async function writeAuditCheckpoint(pool: Pool, options: CheckpointOptions = {}): Promise<AuditCheckpointRecordedData | null> {
  const maxEvents = options.maxEvents ?? CHECKPOINT_MAX_EVENTS;
  return withTransaction(pool, async (client) => {
    const locked = await client.query<{ ok: boolean }>("SELECT pg_try_advisory_xact_lock($1) AS ok", [CHECKPOINT_LOCK_KEY]);
    if (!locked.rows[0]!.ok) return null;
    const last = await client.query<{ version: string; data: unknown }>(
      `SELECT s.version, e.data FROM es_streams s LEFT JOIN es_events e ON e.stream_id = s.stream_id AND e.stream_version = s.version WHERE s.stream_id = $1`,
      [AUDIT_CHECKPOINT_STREAM],
    );
    const version = last.rowCount ? Number(last.rows[0]!.version) : 0;
    const after: LogPosition = last.rowCount ? AuditCheckpointRecordedDataSchema.parse(last.rows[0]!.data).upTo : LOG_START;
    const window = await nextWindow(client, after, maxEvents);
    if (!window || window.events < Math.min(options.minEvents ?? 1, maxEvents)) return null;
    const heads = await streamHeadsIn(client, after, window.upTo);
    const accounts = accountLeaves(heads, await streamAccountsIn(client, after, window.upTo));
    const data: AuditCheckpointRecordedData = {
      after,
      upTo: window.upTo,
      eventCount: window.events,
      streamCount: heads.length,
      merkleRoot: merkleRoot(heads),
      accountsRoot: accountsRoot(accounts),
      heads,
    };
    if (options.signer) data.signature = options.signer.sign(checkpointStatement(version + 1, data));
    await appendToStream(
      client,
      AUDIT_CHECKPOINT_STREAM,
      AUDIT_CHECKPOINT_STREAM_TYPE,
      [{ type: "AuditCheckpointRecorded", data, metadata: { actor: "projector" } }],
      version,
    );
    return data;
  });
}

/**
 * Writes checkpoints until the settled log is covered (or another writer holds the lock, or fewer than
 * `minEvents` are left); returns how many checkpoints and how many events they cover.
 */
export async function writeAuditCheckpoints(pool: Pool, options: CheckpointOptions = {}): Promise<{ checkpoints: number; events: number }> {
  const maxEvents = options.maxEvents ?? CHECKPOINT_MAX_EVENTS;
  const written = { checkpoints: 0, events: 0 };
  for (;;) {
    const checkpoint = await writeAuditCheckpoint(pool, { ...options, maxEvents });
    if (!checkpoint) return written;
    written.checkpoints++;
    written.events += checkpoint.eventCount;
    if (checkpoint.eventCount < maxEvents) return written;
  }
}

/**
 * The next window after `after`: up to `maxEvents` events of transactions that have all ended (so no
 * later commit can land inside it), or null if there is none.
 */
async function nextWindow(db: Queryable, after: LogPosition, maxEvents: number): Promise<{ upTo: LogPosition; events: number } | null> {
  const row = await db.query<{ tx: string; gp: string; n: string }>(
    `SELECT transaction_id::text AS tx, global_position::text AS gp, n FROM (
       SELECT transaction_id, global_position, row_number() OVER (ORDER BY transaction_id, global_position) AS n FROM (
         SELECT transaction_id, global_position FROM es_events
          WHERE (transaction_id, global_position) > ($1::xid8, $2::bigint)
            AND transaction_id < pg_snapshot_xmin(pg_current_snapshot()) AND stream_id <> $3
          ORDER BY transaction_id, global_position LIMIT $4) w) numbered
      ORDER BY n DESC LIMIT 1`,
    [after.transactionId, after.globalPosition, AUDIT_CHECKPOINT_STREAM, maxEvents],
  );
  return row.rowCount ? { upTo: { transactionId: row.rows[0]!.tx, globalPosition: row.rows[0]!.gp }, events: Number(row.rows[0]!.n) } : null;
}

/**
 * The heads, sorted by stream id, of the streams with an event in (after, upTo] (of `streamIds` only, if
 * given). The redundant bounds on transaction_id alone give the planner an estimate of the window's size
 * (it has none for the row comparison): without them it hashes the whole of es_streams for every window.
 */
export async function streamHeadsIn(db: Queryable, after: LogPosition, upTo: LogPosition, streamIds: string[] | null = null): Promise<StreamHead[]> {
  const rows = await db.query<{ stream_id: string; stream_version: string; head: string }>(
    `SELECT DISTINCT ON (e.stream_id) e.stream_id, e.stream_version, ${HEAD_HASH_SQL} AS head
       FROM es_events e JOIN es_streams s USING (stream_id)
      WHERE (e.transaction_id, e.global_position) > ($1::xid8, $2::bigint)
        AND (e.transaction_id, e.global_position) <= ($3::xid8, $4::bigint) AND e.stream_id <> $5
        AND e.transaction_id BETWEEN $1::xid8 AND $3::xid8
        AND ($6::text[] IS NULL OR e.stream_id = ANY($6::text[]))
      ORDER BY e.stream_id, e.stream_version DESC`,
    [after.transactionId, after.globalPosition, upTo.transactionId, upTo.globalPosition, AUDIT_CHECKPOINT_STREAM, streamIds],
  );
  const heads: StreamHead[] = rows.rows.map((r) => [r.stream_id, Number(r.stream_version), r.head]);
  return heads.sort(byStreamId);
}

/** How many events (the checkpoint stream's aside) the log holds in the window (after, upTo]: a checkpoint's eventCount. */
export async function eventsIn(db: Queryable, after: LogPosition, upTo: LogPosition): Promise<number> {
  const rows = await db.query<{ n: string }>(
    `SELECT count(*) AS n FROM es_events e
      WHERE (e.transaction_id, e.global_position) > ($1::xid8, $2::bigint)
        AND (e.transaction_id, e.global_position) <= ($3::xid8, $4::bigint) AND e.stream_id <> $5
        AND e.transaction_id BETWEEN $1::xid8 AND $3::xid8`,
    [after.transactionId, after.globalPosition, upTo.transactionId, upTo.globalPosition, AUDIT_CHECKPOINT_STREAM],
  );
  return Number(rows.rows[0]!.n);
}

/** Stream ids in UTF-16 code unit order (JavaScript's string order), independent of any collation. */
export function byStreamId(a: StreamHead, b: StreamHead): number {
  return a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0;
}
