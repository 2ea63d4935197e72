import type { Queryable } from "../../src/ledger/eventStore/types.ts";
import type { AuditFinding } from "./auditFinding.ts";

/**
 * The events written before the hash chain began (hash NULL) are sealed per stream by migration 060;
 * this recomputes each seal with the same expression and names every stream whose seal differs (a
 * pre-chain event changed, removed, reordered or added).
 */
export async function verifyLegacySeals(db: Queryable, report: (finding: AuditFinding) => void, streamIds: string[] | null): Promise<number> {
  const rows = await db.query<{ stream_id: string; stored: string | null; recomputed: string | null }>(
    `SELECT coalesce(s.stream_id, l.stream_id) AS stream_id, encode(s.legacy_seal, 'hex') AS stored, encode(l.seal, 'hex') AS recomputed
       FROM (SELECT stream_id, legacy_seal FROM es_streams WHERE legacy_seal IS NOT NULL) s
       FULL JOIN (
         SELECT stream_id,
                sha256(convert_to(string_agg(
                  concat_ws(E'\\x1f', stream_version::text, event_id::text, event_type, schema_version::text, data::text, metadata::text,
                            ((extract(epoch FROM recorded_at) * 1000000)::bigint)::text),
                  E'\\x1e' ORDER BY stream_version), 'UTF8')) AS seal
           FROM es_events WHERE hash IS NULL GROUP BY stream_id
       ) l USING (stream_id)
      WHERE s.legacy_seal IS DISTINCT FROM l.seal AND ($1::text[] IS NULL OR coalesce(s.stream_id, l.stream_id) = ANY($1::text[]))`,
    [streamIds],
  );
  for (const r of rows.rows) {
    report({
      kind: "legacy-seal",
      streamId: r.stream_id,
      message: r.stored
        ? `the events written before the chain began no longer match their seal (changed, removed or reordered)`
        : "events without a hash that were not in the log when the chain began (inserted)",
    });
  }
  const sealed = await db.query<{ n: string }>("SELECT count(*) AS n FROM es_streams WHERE legacy_seal IS NOT NULL");
  return Number(sealed.rows[0]!.n);
}
