import pg from "pg";
import type { Pool } from "../../src/db/createPool.ts";
import { readPriceVersions } from "../../src/ledger/pricing/priceTable.ts";
import { allProjections } from "../allProjections.ts";
import { replayReadModels, type ModelDifference } from "../replayReadModels.ts";
import { scopedStreamIds, type AuditFinding, type AuditScope } from "./auditFinding.ts";
import { ChargeChecker, type ChargeStats } from "./verifyCharges.ts";
import { verifyChains, type ChainStats } from "./verifyChains.ts";
import { verifyCheckpoints, type CheckpointStats } from "./verifyCheckpoints.ts";
import { verifyLegacySeals } from "./verifyLegacySeals.ts";
import type { CheckpointPublicKey } from "../../src/ledger/audit/checkpointSignature.ts";
import { CheckpointKeys } from "./checkpointKeys.ts";
import { type SignedHeadStats, type SignedHeadsFile, verifySignedHeads } from "./signedHeads.ts";

export type AuditReport = {
  chains: ChainStats;
  sealedStreams: number;
  checkpoints: CheckpointStats;
  /** Null when no signed heads file was given. */
  signedHeads: SignedHeadStats | null;
  charges: ChargeStats;
  priceVersions: number;
  /** Null when the read models were not compared. */
  readModels: ModelDifference[] | null;
  /** Every finding up to `maxFindings`; `findingCount` counts them all. */
  findings: AuditFinding[];
  findingCount: number;
};

export type VerifyOptions = AuditScope & {
  readModels?: boolean;
  maxFindings?: number;
  batchSize?: number;
  /** Keys checkpoint signatures must verify with (none: each against the key it carries, untrusted). */
  publicKeys?: CheckpointPublicKey[];
  /** Signed checkpoints kept outside the database (`npm run audit -- heads`). */
  signedHeads?: SignedHeadsFile[];
};

/**
 * `npm run audit -- verify`: walks every hash chain, the legacy seals and the checkpoints (and their
 * signatures, and the signed heads kept outside the database when given), recomputes
 * every charge from the price table versions, all in one REPEATABLE READ snapshot (shared by two
 * connections), then rebuilds the read models from the log and compares them with the live ones
 * (replayReadModels). The pool needs two free connections.
 */
export async function verifyAudit(pool: Pool, options: VerifyOptions = {}): Promise<AuditReport> {
  const maxFindings = options.maxFindings ?? 1000;
  const findings: AuditFinding[] = [];
  let findingCount = 0;
  const report = (finding: AuditFinding) => {
    findingCount++;
    if (findings.length < maxFindings) findings.push(finding);
  };
  // Two connections on one snapshot: the chain walk (hashing, in this process) runs while the
  // checkpoint windows are re-derived (mostly in PostgreSQL).
  const client = await pool.connect();
  const second = await pool.connect();
  let partial: Omit<AuditReport, "readModels" | "findings" | "findingCount">;
  try {
    await client.query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
    const snapshot = (await client.query<{ id: string }>("SELECT pg_export_snapshot() AS id")).rows[0]!.id;
    await second.query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
    await second.query(`SET TRANSACTION SNAPSHOT ${pg.escapeLiteral(snapshot)}`);
    const versions = await readPriceVersions(client);
    const charges = new ChargeChecker(versions, report, options);
    const scoped = await scopedStreamIds(client, options);
    const keys = new CheckpointKeys(options.publicKeys ?? []);
    const [chains, [sealedStreams, checkpoints, signedHeads]] = await Promise.all([
      verifyChains(client, scoped, report, (row) => charges.check(row), options.batchSize),
      (async () =>
        [
          await verifyLegacySeals(second, report, scoped),
          await verifyCheckpoints(second, report, scoped, keys),
          options.signedHeads ? await verifySignedHeads(second, options.signedHeads, keys, report, scoped) : null,
        ] as const)(),
    ]);
    await charges.checkRefunds(client);
    partial = { chains, sealedStreams, checkpoints, signedHeads, charges: charges.stats, priceVersions: versions.length };
  } finally {
    for (const c of [second, client]) {
      await c.query("ROLLBACK").catch(() => undefined);
      c.release();
    }
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
