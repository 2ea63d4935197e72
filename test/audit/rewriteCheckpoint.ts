import type { Pool } from "../../src/db/createPool.ts";
import { AUDIT_CHECKPOINT_STREAM } from "../../src/ledger/audit/auditCheckpoint.ts";
import { rewriteEventAndChain } from "./operatorRewrite.ts";

/** Edits checkpoint `version` in place as an operator without the key would, its hash chain recomputed. */
export async function rewriteCheckpoint(pool: Pool, version: number, edit: (data: Record<string, unknown>) => void): Promise<void> {
  await rewriteEventAndChain(pool, AUDIT_CHECKPOINT_STREAM, version, edit);
}
