import { AUDIT_CHECKPOINT_STREAM, AuditCheckpointRecordedDataSchema, byStreamId, eventsIn, streamHeadsIn } from "../../src/ledger/audit/auditCheckpoint.ts";
import { accountLeaves, accountsRoot, streamAccountsIn } from "../../src/ledger/audit/accountsRoot.ts";
import { merkleRoot, type StreamHead } from "../../src/ledger/audit/merkleRoot.ts";
import type { Queryable } from "../../src/ledger/eventStore/types.ts";
import type { AuditFinding } from "./auditFinding.ts";
import type { CheckpointKeys } from "./checkpointKeys.ts";

export type CheckpointStats = {
  checkpoints: number;
  streamHeads: number;
  /** Checkpoints with a signature that verifies. */
  signed: number;
  /** Checkpoints with a signature that does not verify (or not with a key the auditor trusts): each a finding. */
  badlySigned: number;
  unsigned: number;
  /** Key ids of the verified signatures. */
  keyIds: string[];
  /** Whether the signatures were checked against keys the auditor gave (not those the checkpoints carry). */
  keysTrusted: boolean;
};

/**
 * For every checkpoint (their own chain is checked by verifyChains): its signature verifies (against the
 * trusted keys, or the key it carries when none is given); its Merkle root is the root of the heads it
 * lists, and the log still has exactly those heads in its window (after, upTo]: a stream removed, an
 * event changed or removed, or a stream added afterwards is named. Unscoped (no `streamIds`), its
 * accounts root (audit-checkpoint/2) must be that of the log's streams per account in the window. With trusted keys, an unsigned
 * checkpoint after a signed one, or an unsigned newest checkpoint, is a finding (a signature stripped
 * along with a rewrite). One checkpoint's heads are in memory at a time.
 */
export async function verifyCheckpoints(
  db: Queryable,
  report: (finding: AuditFinding) => void,
  streamIds: string[] | null,
  keys: CheckpointKeys,
): Promise<CheckpointStats> {
  const stats: CheckpointStats = { checkpoints: 0, streamHeads: 0, signed: 0, badlySigned: 0, unsigned: 0, keyIds: [], keysTrusted: keys.trusted.length > 0 };
  const inScope = streamIds ? new Set(streamIds) : null;
  let after = 0;
  let lastSigned = false;
  for (;;) {
    const rows = await db.query<{ stream_version: string; data: unknown }>(
      "SELECT stream_version, data FROM es_events WHERE stream_id = $1 AND stream_version > $2 ORDER BY stream_version LIMIT 1",
      [AUDIT_CHECKPOINT_STREAM, after],
    );
    if (!rows.rowCount) break;
    const version = Number(rows.rows[0]!.stream_version);
    after = version;
    stats.checkpoints++;
    const at = { kind: "checkpoint" as const, streamId: AUDIT_CHECKPOINT_STREAM, version };
    const parsed = AuditCheckpointRecordedDataSchema.safeParse(rows.rows[0]!.data);
    if (!parsed.success) {
      report({ ...at, message: "not a readable checkpoint" });
      continue;
    }
    const checkpoint = parsed.data;
    if (checkpoint.signature) {
      const problem = keys.problem(version, checkpoint, checkpoint.signature);
      if (problem) {
        stats.badlySigned++;
        report({ ...at, kind: "signature", message: `checkpoint ${version}: ${problem}` });
      } else {
        stats.signed++;
        if (!stats.keyIds.includes(checkpoint.signature.keyId)) stats.keyIds.push(checkpoint.signature.keyId);
      }
    } else {
      stats.unsigned++;
      if (lastSigned && keys.trusted.length)
        report({ ...at, kind: "signature", message: `checkpoint ${version} is unsigned after signed ones (its signature was removed?)` });
    }
    lastSigned = checkpoint.signature !== undefined;
    const recorded = [...checkpoint.heads].sort(byStreamId) as StreamHead[];
    stats.streamHeads += recorded.length;
    if (merkleRoot(recorded) !== checkpoint.merkleRoot || recorded.length !== checkpoint.streamCount) {
      report({ ...at, message: "the checkpoint's Merkle root or count is not that of the heads it lists" });
    }
    if (checkpoint.accountsRoot !== undefined && !streamIds) {
      // Which stream belongs to which account, recomputed from the log (over the heads it signed).
      const leaves = accountLeaves(recorded, await streamAccountsIn(db, checkpoint.after, checkpoint.upTo));
      if (accountsRoot(leaves) !== checkpoint.accountsRoot)
        report({
          ...at,
          message: `checkpoint ${version}: its accounts root is not that of the log's streams per account in its window (a stream removed or added, or an event's account changed)`,
        });
    }
    if (!streamIds) {
      // The window's events, counted in log order: an event moved into or out of it (its log position
      // changed) shows here even where every stream head stayed the same.
      const events = await eventsIn(db, checkpoint.after, checkpoint.upTo);
      if (events !== checkpoint.eventCount)
        report({
          ...at,
          message: `checkpoint ${version}: its window of the log holds ${events} events, the checkpoint counted ${checkpoint.eventCount} (events moved in the log order, added or removed)`,
        });
    }
    const current = new Map((await streamHeadsIn(db, checkpoint.after, checkpoint.upTo, streamIds)).map((h) => [h[0], h]));
    for (const [streamId, headVersion, hash] of recorded) {
      const now = current.get(streamId);
      current.delete(streamId);
      if (inScope && !inScope.has(streamId)) continue;
      const where = { kind: "checkpoint" as const, streamId, version: headVersion };
      if (!now) report({ ...where, message: `checkpoint ${version}: the stream is gone from the log (its head was version ${headVersion})` });
      else if (now[1] !== headVersion)
        report({ ...where, message: `checkpoint ${version}: the head was version ${headVersion}, the log now has version ${now[1]} in this window` });
      else if (now[2] !== hash) report({ ...where, message: `checkpoint ${version}: the head hash differs from the one the checkpoint recorded` });
    }
    for (const [streamId, head] of current) {
      if (!inScope || inScope.has(streamId))
        report({
          kind: "checkpoint",
          streamId,
          version: head[1],
          message: `checkpoint ${version}: events in this window that the checkpoint does not list (added)`,
        });
    }
  }
  if (stats.checkpoints && !lastSigned && keys.trusted.length)
    report({
      kind: "signature",
      streamId: AUDIT_CHECKPOINT_STREAM,
      version: after,
      message: `the newest checkpoint (${after}) is unsigned though you gave a public key: nothing after the last signed checkpoint is proven`,
    });
  return stats;
}
