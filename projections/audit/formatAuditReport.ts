import { microToChf } from "../../src/ledger/money.ts";
import type { AuditReport } from "./verifyAudit.ts";

/** The human summary `npm run audit -- verify` prints: figures first, then every finding, one a line. */
export function formatAuditReport(report: AuditReport): string {
  const lines = [
    `chains:       ${report.chains.events} events in ${report.chains.streams} streams (${report.chains.preChainEvents} written before the chain began, ${report.sealedStreams} sealed streams)`,
    `checkpoints:  ${report.checkpoints.checkpoints} checked, ${report.checkpoints.streamHeads} stream heads`,
    `charges:      ${report.charges.charges} recomputed from ${report.priceVersions} price table version(s), total CHF ${microToChf(report.charges.recomputedMicroChf)}` +
      (report.charges.atSupersededVersion ? `, ${report.charges.atSupersededVersion} at a superseded version` : ""),
    report.readModels
      ? `read models:  ${report.readModels.map((m) => `${m.model} ${m.onlyLive.length || m.onlyRebuilt.length ? "DIFFERS" : "ok"}`).join(", ")}`
      : "read models:  not compared",
  ];
  for (const f of report.findings) {
    const where = f.streamId ? `${f.streamId}${f.version !== undefined ? ` v${f.version}` : ""}` : "-";
    lines.push(`FAIL ${f.kind} ${where}: ${f.message}`);
  }
  if (report.findingCount > report.findings.length) lines.push(`... and ${report.findingCount - report.findings.length} more`);
  lines.push(report.findingCount === 0 ? "OK: the log, its checkpoints, the charges and the read models agree" : `${report.findingCount} finding(s)`);
  return `${lines.join("\n")}\n`;
}
