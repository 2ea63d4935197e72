import { once } from "node:events";
import type { Writable } from "node:stream";
import { z } from "zod";
import { AUDIT_CHECKPOINT_STREAM, AuditCheckpointRecordedDataSchema, byStreamId } from "../../src/ledger/audit/auditCheckpoint.ts";
import { CheckpointSignatureSchema } from "../../src/ledger/audit/checkpointSignature.ts";
import { merkleRoot, type StreamHead } from "../../src/ledger/audit/merkleRoot.ts";
import type { Queryable } from "../../src/ledger/eventStore/types.ts";
import type { AuditFinding } from "./auditFinding.ts";
import type { CheckpointKeys } from "./checkpointKeys.ts";

const LogPositionSchema = z.object({ transactionId: z.string(), globalPosition: z.string() });

/** One signed checkpoint as an auditor keeps it outside the database. */
export const SignedCheckpointSchema = z.object({
  checkpoint: z.number().int().positive(),
  after: LogPositionSchema,
  upTo: LogPositionSchema,
  eventCount: z.number().int().positive(),
  streamCount: z.number().int().nonnegative(),
  merkleRoot: z.string(),
  /** audit-checkpoint/2 checkpoints: the accounts root they signed. */
  accountsRoot: z.string().optional(),
  heads: z.array(z.tuple([z.string(), z.number().int().positive(), z.string()])),
  signature: CheckpointSignatureSchema,
});
export type SignedCheckpoint = z.infer<typeof SignedCheckpointSchema>;

/** `npm run audit -- heads --out heads.json`: every signed checkpoint (after `since`), in order. */
export const SignedHeadsFileSchema = z.object({
  format: z.literal("audit-heads/1"),
  writtenAt: z.string(),
  checkpoints: z.array(SignedCheckpointSchema),
});
export type SignedHeadsFile = z.infer<typeof SignedHeadsFileSchema>;

/**
 * Writes the signed checkpoints after checkpoint `since` as an audit-heads/1 file, one checkpoint per
 * line (so memory holds one at a time); returns how many. Unsigned checkpoints are left out: they prove
 * nothing against someone who can write to the database.
 */
export async function writeSignedHeads(db: Queryable, out: Writable, since = 0): Promise<{ checkpoints: number; skippedUnsigned: number }> {
  const write = async (text: string) => {
    if (!out.write(text)) await once(out, "drain");
  };
  await write(`{"format":"audit-heads/1","writtenAt":${JSON.stringify(new Date().toISOString())},"checkpoints":[`);
  let after = since;
  const counts = { checkpoints: 0, skippedUnsigned: 0 };
  for (;;) {
    const rows = await db.query<{ stream_version: string; data: unknown }>(
      "SELECT stream_version, data FROM es_events WHERE stream_id = $1 AND stream_version > $2 ORDER BY stream_version LIMIT 1",
      [AUDIT_CHECKPOINT_STREAM, after],
    );
    if (!rows.rowCount) break;
    after = Number(rows.rows[0]!.stream_version);
    const data = AuditCheckpointRecordedDataSchema.parse(rows.rows[0]!.data);
    if (!data.signature) {
      counts.skippedUnsigned++;
      continue;
    }
    const entry: SignedCheckpoint = { checkpoint: after, ...data, signature: data.signature };
    await write(`${counts.checkpoints ? "," : ""}\n${JSON.stringify(entry)}`);
    counts.checkpoints++;
  }
  await write("\n]}\n");
  return counts;
}

export type SignedHeadStats = { checkpoints: number; streams: number };

/**
 * Compares the log with signed checkpoints kept outside it: each one's signature verifies, its heads
 * give its Merkle root, the log still holds that checkpoint unchanged, and for every stream the newest
 * signed head (version and hash) is still in the log. A stream removed, or rewritten and its chain
 * recomputed, is named even when the log's own checkpoints were rewritten or removed with it: its head
 * hash is signed, and nobody without the key can sign another one. (The chain walk shows that the
 * events before a head that still matches are unchanged.)
 */
export async function verifySignedHeads(
  db: Queryable,
  files: SignedHeadsFile[],
  keys: CheckpointKeys,
  report: (finding: AuditFinding) => void,
  streamIds: string[] | null,
): Promise<SignedHeadStats> {
  const inScope = streamIds ? new Set(streamIds) : null;
  const newest = new Map<string, { version: number; hash: string; checkpoint: number }>();
  const seen = new Set<number>();
  for (const checkpoint of files.flatMap((f) => f.checkpoints).sort((a, b) => a.checkpoint - b.checkpoint)) {
    if (seen.has(checkpoint.checkpoint)) continue;
    seen.add(checkpoint.checkpoint);
    const at = { kind: "signature" as const, streamId: AUDIT_CHECKPOINT_STREAM, version: checkpoint.checkpoint };
    const problem = keys.problem(checkpoint.checkpoint, checkpoint, checkpoint.signature);
    const heads = [...checkpoint.heads].sort(byStreamId) as StreamHead[];
    if (problem) {
      report({ ...at, message: `heads file, checkpoint ${checkpoint.checkpoint}: ${problem}; its heads are not used` });
      continue;
    }
    if (merkleRoot(heads) !== checkpoint.merkleRoot || heads.length !== checkpoint.streamCount) {
      report({ ...at, message: `heads file, checkpoint ${checkpoint.checkpoint}: its heads are not the ones signed (Merkle root); not used` });
      continue;
    }
    const inLog = await db.query<{ data: unknown }>("SELECT data FROM es_events WHERE stream_id = $1 AND stream_version = $2", [
      AUDIT_CHECKPOINT_STREAM,
      checkpoint.checkpoint,
    ]);
    const logged = inLog.rowCount ? AuditCheckpointRecordedDataSchema.safeParse(inLog.rows[0]!.data) : null;
    if (!logged) report({ ...at, kind: "checkpoint", message: `signed checkpoint ${checkpoint.checkpoint} (in the heads file) is gone from the log` });
    else if (!logged.success || logged.data.merkleRoot !== checkpoint.merkleRoot || logged.data.signature?.value !== checkpoint.signature.value)
      report({ ...at, kind: "checkpoint", message: `checkpoint ${checkpoint.checkpoint} in the log is not the signed one in the heads file (rewritten)` });
    for (const [streamId, version, hash] of heads) newest.set(streamId, { version, hash, checkpoint: checkpoint.checkpoint });
  }
  const entries = [...newest].filter(([streamId]) => !inScope || inScope.has(streamId));
  for (let i = 0; i < entries.length; i += 5000) {
    const batch = entries.slice(i, i + 5000);
    const rows = await db.query<{ stream_id: string; version: number; found: boolean; hash: string | null; stream_exists: boolean }>(
      `SELECT h.stream_id, h.version, e.stream_id IS NOT NULL AS found,
              coalesce(encode(e.hash, 'hex'), 'legacy:' || encode(s.legacy_seal, 'hex')) AS hash,
              EXISTS (SELECT 1 FROM es_events x WHERE x.stream_id = h.stream_id) AS stream_exists
         FROM unnest($1::text[], $2::bigint[]) AS h(stream_id, version)
         LEFT JOIN es_events e ON e.stream_id = h.stream_id AND e.stream_version = h.version
         LEFT JOIN es_streams s ON s.stream_id = h.stream_id`,
      [batch.map(([s]) => s), batch.map(([, h]) => h.version)],
    );
    const byStream = new Map(rows.rows.map((r) => [r.stream_id, r]));
    for (const [streamId, signed] of batch) {
      const row = byStream.get(streamId)!;
      const where = { kind: "signed-head" as const, streamId, version: signed.version };
      const what = `checkpoint ${signed.checkpoint} signed version ${signed.version}`;
      if (!row.stream_exists) report({ ...where, message: `the stream is gone from the log (${what})` });
      else if (!row.found) report({ ...where, message: `version ${signed.version} is gone from the stream (${what}; events removed)` });
      else if (row.hash !== signed.hash) report({ ...where, message: `rewritten: the event no longer has the hash ${what} with (its chain was recomputed)` });
    }
  }
  return { checkpoints: seen.size, streams: newest.size };
}
