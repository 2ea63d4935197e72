import { accountStreamId } from "../accounts/accountEvents.ts";
import type { LogPosition } from "../eventStore/logPosition.ts";
import type { Queryable } from "../eventStore/types.ts";
import { accountLeaves, streamAccountsIn } from "./accountsRoot.ts";
import { AUDIT_CHECKPOINT_STREAM, AuditCheckpointRecordedDataSchema, byStreamId } from "./auditCheckpoint.ts";
import type { CheckpointSignature } from "./checkpointSignature.ts";
import { type MerkleStep, merkleProofs } from "./merkleProof.ts";
import type { StreamHead } from "./merkleRoot.ts";

/**
 * A signed checkpoint as an account's export carries it: what the signature covers, and for each of the
 * account's streams in its window the head and its Merkle audit path (no other account's stream shows).
 * With an accounts root (audit-checkpoint/2), also the account's leaf and its path to that root: the
 * heads are then all of the account's streams in the window. The offline check
 * (tools/audit/verifyExport.ts) verifies the signature, each path, and that the export holds every signed
 * head: a removed or changed event of a checkpointed window fails it, even with its head removed too.
 */
export type CheckpointProof = {
  checkpoint: number;
  after: LogPosition;
  upTo: LogPosition;
  eventCount: number;
  streamCount: number;
  merkleRoot: string;
  /** Signed by audit-checkpoint/2 checkpoints only. */
  accountsRoot?: string;
  signature: CheckpointSignature;
  heads: [streamId: string, version: number, hash: string, proof: MerkleStep[]][];
  /**
   * With accountsRoot: the account's leaf [accountId, heads] (every stream of the account in the window,
   * sorted by stream id, as accountLeaves() builds it) and its Merkle path to accountsRoot. `heads` above
   * then lists the same streams with their paths to merkleRoot.
   */
  account?: { accountId: string; heads: StreamHead[]; path: MerkleStep[] };
};

/** The settled-transaction horizon to pass to readAccountCheckpointProofs, read before the export's last page. */
export async function readExportHorizon(db: Queryable): Promise<string> {
  const row = await db.query<{ xmin: string }>("SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS xmin");
  return row.rows[0]!.xmin;
}

/**
 * The signed checkpoints covering an event of the account, whose windows end before `horizon` (a
 * readExportHorizon taken before the export's last page was read: every event such a window covers is
 * in the export), with proofs of the account's stream heads.
 */
export async function readAccountCheckpointProofs(db: Queryable, accountId: string, horizon: string): Promise<CheckpointProof[]> {
  const windows = await db.query<{ cp: string; streams: string[] }>(
    `WITH cp AS (
       SELECT stream_version AS cp,
              (data->'after'->>'transactionId')::xid8 AS atx, (data->'after'->>'globalPosition')::bigint AS agp,
              (data->'upTo'->>'transactionId')::xid8 AS utx, (data->'upTo'->>'globalPosition')::bigint AS ugp
         FROM es_events WHERE stream_id = $3 AND data ? 'signature')
     SELECT cp.cp::text AS cp, array_agg(DISTINCT e.stream_id) AS streams
       FROM cp JOIN es_events e
         ON (e.transaction_id, e.global_position) > (cp.atx, cp.agp) AND (e.transaction_id, e.global_position) <= (cp.utx, cp.ugp)
        AND e.transaction_id BETWEEN cp.atx AND cp.utx
      WHERE cp.utx < $4::xid8 AND (e.stream_id = $2 OR (e.data ? 'accountId' AND e.data->>'accountId' = $1))
      GROUP BY cp.cp ORDER BY cp.cp`,
    [accountId, accountStreamId(accountId), AUDIT_CHECKPOINT_STREAM, horizon],
  );
  const proofs: CheckpointProof[] = [];
  for (const window of windows.rows) {
    const row = await db.query<{ data: unknown }>("SELECT data FROM es_events WHERE stream_id = $1 AND stream_version = $2", [
      AUDIT_CHECKPOINT_STREAM,
      window.cp,
    ]);
    const data = AuditCheckpointRecordedDataSchema.parse(row.rows[0]!.data);
    if (!data.signature) continue;
    const heads = [...data.heads].sort(byStreamId) as StreamHead[];
    const own = new Set(window.streams);
    const proof: CheckpointProof = {
      checkpoint: Number(window.cp),
      after: data.after,
      upTo: data.upTo,
      eventCount: data.eventCount,
      streamCount: data.streamCount,
      merkleRoot: data.merkleRoot,
      signature: data.signature,
      heads: [],
    };
    if (data.accountsRoot !== undefined) {
      // The account's leaf, recomputed from the log as the checkpoint computed it, and its path.
      proof.accountsRoot = data.accountsRoot;
      const leaves = accountLeaves(heads, await streamAccountsIn(db, data.after, data.upTo));
      const at = leaves.findIndex((leaf) => leaf[0] === accountId);
      if (at >= 0) {
        own.clear();
        for (const head of leaves[at]![1]) own.add(head[0]);
        proof.account = { accountId, heads: leaves[at]![1], path: merkleProofs(leaves, [at])[0]! };
      }
    }
    const indices = heads.flatMap((h, i) => (own.has(h[0]) ? [i] : []));
    const paths = merkleProofs(heads, indices);
    proof.heads = indices.map((i, p) => [...heads[i]!, paths[p]!]);
    proofs.push(proof);
  }
  return proofs;
}
