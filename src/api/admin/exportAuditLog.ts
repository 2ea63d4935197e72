import type { Writable } from "node:stream";
import { once } from "node:events";
import type { Pool } from "../../db/createPool.ts";
import { AUDIT_CSV_HEADER, auditCsvLine, readAuditLog } from "../../ledger/audit/auditLog.ts";
import type { LogPosition } from "../../ledger/eventStore/logPosition.ts";
import { readAccountCheckpointProofs, readExportHorizon } from "../../ledger/audit/accountCheckpointProofs.ts";

/**
 * `npm run admin -- export`: writes the account's whole history (readAuditLog, page by page, so memory
 * stays flat) to `out` as NDJSON (one entry per line) or CSV (header, then one line per entry). NDJSON
 * ends with one line per signed checkpoint covering the account ({checkpoint, ..., signature, heads}
 * with Merkle proofs of the account's streams only), which the offline check verifies.
 */
export async function exportAuditLog(pool: Pool, accountId: string, format: "ndjson" | "csv", out: Writable, pageSize = 1000): Promise<number> {
  const write = async (text: string) => {
    if (!out.write(text)) await once(out, "drain");
  };
  if (format === "csv") await write(AUDIT_CSV_HEADER);
  let after: LogPosition | null = null;
  let count = 0;
  for (;;) {
    // Read before the page: every window of a checkpoint ending before it is in what is exported.
    const horizon = await readExportHorizon(pool);
    const page = await readAuditLog(pool, accountId, after, pageSize);
    for (const entry of page.entries) await write(format === "csv" ? auditCsvLine(entry) : `${JSON.stringify(entry)}\n`);
    count += page.entries.length;
    if (!page.next) {
      if (format === "ndjson") for (const proof of await readAccountCheckpointProofs(pool, accountId, horizon)) await write(`${JSON.stringify(proof)}\n`);
      return count;
    }
    after = page.next;
  }
}
