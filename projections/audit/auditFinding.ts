import type { Queryable } from "../../src/ledger/eventStore/types.ts";

/** One thing the verifier found wrong, naming where: stream and version when it knows them. */
export type AuditFinding = {
  kind: "chain" | "stream-head" | "legacy-seal" | "checkpoint" | "signature" | "signed-head" | "charge" | "read-model";
  streamId?: string;
  version?: number;
  message: string;
};

export type AuditScope = {
  /** Only the streams of this account (its account stream and its completions). */
  accountId?: string;
  /** Only streams with an event recorded at or after / before this instant (each is still walked whole). */
  from?: Date;
  to?: Date;
};

/**
 * The stream ids in scope, or null for every stream: the account's stream and every stream with an
 * event naming the account (its completions), with an event recorded in [from, to). A completion
 * stream removed whole no longer names its account: only the verify of the whole log names it.
 */
export async function scopedStreamIds(db: Queryable, scope: AuditScope): Promise<string[] | null> {
  if (!scope.accountId && !scope.from && !scope.to) return null;
  const rows = await db.query<{ stream_id: string }>(
    `SELECT DISTINCT stream_id FROM es_events
      WHERE ($1::text IS NULL OR stream_id = 'account-' || $1 OR (data ? 'accountId' AND data->>'accountId' = $1))
        AND ($2::timestamptz IS NULL OR recorded_at >= $2) AND ($3::timestamptz IS NULL OR recorded_at < $3)`,
    [scope.accountId ?? null, scope.from ?? null, scope.to ?? null],
  );
  const ids = rows.rows.map((r) => r.stream_id);
  // The account's own stream is in scope even if it is gone (the checkpoints then name it).
  if (scope.accountId && !ids.includes(`account-${scope.accountId}`)) ids.push(`account-${scope.accountId}`);
  return ids;
}
