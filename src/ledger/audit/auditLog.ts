import { accountStreamId } from "../accounts/accountEvents.ts";
import type { LogPosition } from "../eventStore/logPosition.ts";
import type { Queryable } from "../eventStore/types.ts";

/**
 * One line of an audit export: the event with everything its hash covers, its previous hash and its
 * hash, so the export verifies offline (tools/audit/verifyExport.ts). The same fields in JSON, NDJSON
 * and CSV (data and metadata as JSON text there).
 */
export type AuditLogEntry = {
  stream_id: string;
  version: number;
  event_id: string;
  type: string;
  schema_version: number;
  recorded_at: string;
  data: Record<string, unknown>;
  metadata: Record<string, unknown>;
  prev_hash: string | null;
  hash: string | null;
};

export type AuditLogPage = { entries: AuditLogEntry[]; next: LogPosition | null };

type Row = {
  stream_id: string;
  stream_version: string;
  event_id: string;
  event_type: string;
  schema_version: number;
  recorded_at: Date;
  data: Record<string, unknown>;
  metadata: Record<string, unknown>;
  prev_hash: string | null;
  hash: string | null;
  tx: string;
  gp: string;
};

/**
 * The account's history in log order after `after`: every event of its account stream (registration,
 * subscription, budget, key lifecycle), every event naming it in its data (`accountId`: UsageRecorded,
 * the batch lifecycle), and every event that names no account in a stream where an earlier event names
 * it (a batch's end events written before they carried `accountId`): a checkpoint signs a stream's last
 * event in its window as the head of the account's stream, whichever event it is. Only transactions
 * older than every one still open are read (as readAll), so a later page never misses an event that
 * commits behind the cursor. `next` is the cursor of the following page, null at the end.
 *
 * Cost: the account's batches are found by its rows of `batches` (a batch stream's first event, its
 * BatchCreated, names the account the row has), one index probe each for the events of its stream that
 * name no account, on every page (an earlier page may hold the event that names a stream); its usages
 * are not read again, so a page costs the same whatever the account's history.
 */
export async function readAuditLog(db: Queryable, accountId: string, after: LogPosition | null, limit: number): Promise<AuditLogPage> {
  const rows = await db.query<Row>(
    `WITH page AS (
       (SELECT transaction_id, global_position FROM es_events
         WHERE stream_id = $2 AND (transaction_id, global_position) > ($3::xid8, $4::bigint) AND transaction_id < pg_snapshot_xmin(pg_current_snapshot())
         ORDER BY transaction_id, global_position LIMIT $5)
       UNION
       (SELECT transaction_id, global_position FROM es_events
         WHERE data ? 'accountId' AND data->>'accountId' = $1
           AND (transaction_id, global_position) > ($3::xid8, $4::bigint) AND transaction_id < pg_snapshot_xmin(pg_current_snapshot())
         ORDER BY transaction_id, global_position LIMIT $5)
       UNION
       (SELECT later.transaction_id, later.global_position FROM batches b
          CROSS JOIN LATERAL (
            SELECT e.transaction_id, e.global_position FROM es_events e
             WHERE e.stream_id = 'batch-' || b.id AND NOT e.data ? 'accountId'
               AND (e.transaction_id, e.global_position) > ($3::xid8, $4::bigint) AND e.transaction_id < pg_snapshot_xmin(pg_current_snapshot())
             ORDER BY e.stream_version LIMIT $5) later
         WHERE b.account_id = $1
         ORDER BY 1, 2 LIMIT $5)
       ORDER BY 1, 2 LIMIT $5
     )
     SELECT e.stream_id, e.stream_version, e.event_id, e.event_type, e.schema_version, e.recorded_at, e.data, e.metadata,
            encode(e.prev_hash, 'hex') AS prev_hash, encode(e.hash, 'hex') AS hash, e.transaction_id::text AS tx, e.global_position::text AS gp
       FROM page p JOIN es_events e ON e.global_position = p.global_position
      ORDER BY p.transaction_id, p.global_position`,
    [accountId, accountStreamId(accountId), after?.transactionId ?? "0", after?.globalPosition ?? "0", limit + 1],
  );
  const more = rows.rows.length > limit;
  const page = more ? rows.rows.slice(0, limit) : rows.rows;
  const last = page.at(-1);
  return {
    entries: page.map((r) => ({
      stream_id: r.stream_id,
      version: Number(r.stream_version),
      event_id: r.event_id,
      type: r.event_type,
      schema_version: r.schema_version,
      recorded_at: r.recorded_at.toISOString(),
      data: r.data,
      metadata: r.metadata,
      prev_hash: r.prev_hash,
      hash: r.hash,
    })),
    next: more && last ? { transactionId: last.tx, globalPosition: last.gp } : null,
  };
}

/** An opaque page cursor: base64url of "transactionId.globalPosition". */
export function encodeAuditCursor(position: LogPosition): string {
  return Buffer.from(`${position.transactionId}.${position.globalPosition}`).toString("base64url");
}

/** The position of a cursor, or null when it is not one. */
export function decodeAuditCursor(cursor: string): LogPosition | null {
  const match = /^(\d{1,20})\.(\d{1,19})$/.exec(Buffer.from(cursor, "base64url").toString("utf8"));
  if (!match || BigInt(match[1]!) > 18_446_744_073_709_551_615n || BigInt(match[2]!) > 9_223_372_036_854_775_807n) return null;
  return { transactionId: match[1]!, globalPosition: match[2]! };
}

export const AUDIT_CSV_COLUMNS = [
  "stream_id",
  "version",
  "event_id",
  "type",
  "schema_version",
  "recorded_at",
  "data",
  "metadata",
  "prev_hash",
  "hash",
] as const;

/** RFC 4180 field: quoted when it holds a comma, quote, CR or LF; quotes doubled. */
function csvField(value: string): string {
  return /[",\r\n]/.test(value) ? `"${value.replaceAll('"', '""')}"` : value;
}

/** One CSV line (CRLF-terminated) of an entry; data and metadata as JSON text. */
export function auditCsvLine(entry: AuditLogEntry): string {
  return `${AUDIT_CSV_COLUMNS.map((c) => {
    const v = entry[c];
    return csvField(v === null ? "" : typeof v === "object" ? JSON.stringify(v) : String(v));
  }).join(",")}\r\n`;
}

export const AUDIT_CSV_HEADER = `${AUDIT_CSV_COLUMNS.join(",")}\r\n`;
