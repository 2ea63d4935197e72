import type { Writable } from "node:stream";
import { once } from "node:events";
import type { Pool } from "../../db/createPool.ts";
import { AUDIT_CSV_HEADER, auditCsvLine, readAuditLog } from "../../ledger/audit/auditLog.ts";
import type { LogPosition } from "../../ledger/eventStore/logPosition.ts";

/**
 * `npm run admin -- export`: writes the account's whole history (readAuditLog, page by page, so memory
 * stays flat) to `out` as NDJSON (one entry per line) or CSV (header, then one line per entry).
 */
export async function exportAuditLog(pool: Pool, accountId: string, format: "ndjson" | "csv", out: Writable, pageSize = 1000): Promise<number> {
  const write = async (text: string) => {
    if (!out.write(text)) await once(out, "drain");
  };
  if (format === "csv") await write(AUDIT_CSV_HEADER);
  let after: LogPosition | null = null;
  let count = 0;
  for (;;) {
    const page = await readAuditLog(pool, accountId, after, pageSize);
    for (const entry of page.entries) await write(format === "csv" ? auditCsvLine(entry) : `${JSON.stringify(entry)}\n`);
    count += page.entries.length;
    if (!page.next) return count;
    after = page.next;
  }
}
