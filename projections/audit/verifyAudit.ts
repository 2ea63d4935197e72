import type { Pool } from "../../src/db/createPool.ts";
import { readPriceVersions } from "../../src/ledger/pricing/priceTable.ts";
import { allProjections } from "../allProjections.ts";
import { replayReadModels, type ModelDifference } from "../replayReadModels.ts";
import { scopedStreamIds, type AuditFinding, type AuditScope } from "./auditFinding.ts";
import { ChargeChecker, type ChargeStats } from "./verifyCharges.ts";
import { verifyChains, type ChainStats } from "./verifyChains.ts";
import { verifyCheckpoints, type CheckpointStats } from "./verifyCheckpoints.ts";
import { verifyLegacySeals } from "./verifyLegacySeals.ts";

export type AuditReport = {
  chains: ChainStats;
  sealedStreams: number;
  checkpoints: CheckpointStats;
  charges: ChargeStats;
  priceVersions: number;
  /** Null when the read models were not compared. */
  readModels: ModelDifference[] | null;
  /** Every finding up to `maxFindings`; `findingCount` counts them all. */
  findings: AuditFinding[];
  findingCount: number;
};

export type VerifyOptions = AuditScope & { readModels?: boolean; maxFindings?: number; batchSize?: number };

/**
 * `npm run audit -- verify`: walks every hash chain, the legacy seals and the checkpoints, recomputes
 * every charge from the price table versions, all in one REPEATABLE READ snapshot, then rebuilds the
 * read models from the log and compares them with the live ones (replayReadModels).
 */
export async function verifyAudit(pool: Pool, options: VerifyOptions = {}): Promise<AuditReport> {
  const maxFindings = options.maxFindings ?? 1000;
  const findings: AuditFinding[] = [];
  let findingCount = 0;
  const report = (finding: AuditFinding) => {
    findingCount++;
    if (findings.length < maxFindings) findings.push(finding);
  };
  const client = await pool.connect();
  let partial: Omit<AuditReport, "readModels" | "findings" | "findingCount">;
  try {
    await client.query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
    const versions = await readPriceVersions(client);
    const charges = new ChargeChecker(versions, report, options);
    const scoped = await scopedStreamIds(client, options);
    const chains = await verifyChains(client, scoped, report, (row) => charges.check(row), options.batchSize);
    const sealedStreams = await verifyLegacySeals(client, report, scoped);
    const checkpoints = await verifyCheckpoints(client, report, scoped);
    partial = { chains, sealedStreams, checkpoints, charges: charges.stats, priceVersions: versions.length };
  } finally {
    await client.query("ROLLBACK").catch(() => undefined);
    client.release();
  }
  let readModels: ModelDifference[] | null = null;
  if (options.readModels !== false) {
    readModels = (await replayReadModels(pool, allProjections)).models;
    for (const m of readModels) {
      if (m.onlyLive.length || m.onlyRebuilt.length) {
        report({
          kind: "read-model",
          message: `${m.model}: the live table differs from the one rebuilt from the log (${m.onlyLive.length} rows only live, ${m.onlyRebuilt.length} only rebuilt)`,
        });
      }
    }
  }
  return { ...partial, readModels, findings, findingCount };
}
