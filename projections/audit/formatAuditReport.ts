import { microToChf } from "../../src/ledger/money.ts";
import type { AuditReport } from "./verifyAudit.ts";

function signatureLine(report: AuditReport): string {
  const c = report.checkpoints;
  const keys = c.keyIds.length ? ` by ${c.keyIds.join(", ")}` : "";
  const trust = c.keysTrusted
    ? "checked against the public key(s) you gave"
    : c.signed
      ? "checked only against the keys the checkpoints carry: give --public-key to prove who signed"
      : "";
  const weak =
    c.signed === 0 && c.badlySigned === 0
      ? "UNSIGNED checkpoints: they prove nothing against someone who can write to the database (set AUDIT_SIGNING_KEY_PATH)"
      : "";
  const bad = c.badlySigned ? `, ${c.badlySigned} signed but not verified (see the findings)` : "";
  return [`${c.signed} signed${keys}${bad}, ${c.unsigned} unsigned`, trust, weak].filter(Boolean).join("; ");
}

/** The human summary `npm run audit -- verify` prints: figures first, then every finding, one a line. */
export function formatAuditReport(report: AuditReport): string {
  const lines = [
    `chains:       ${report.chains.events} events in ${report.chains.streams} streams (${report.chains.preChainEvents} written before the chain began, ${report.sealedStreams} sealed streams)`,
    `checkpoints:  ${report.checkpoints.checkpoints} checked, ${report.checkpoints.streamHeads} stream heads`,
    `signatures:   ${signatureLine(report)}`,
    report.signedHeads
      ? `signed heads: ${report.signedHeads.streams} streams from ${report.signedHeads.checkpoints} signed checkpoint(s) kept outside the log compared`
      : "signed heads: none given (--heads): a rewrite that also rewrites the log's own checkpoints is caught only by their signatures",
    `charges:      ${report.charges.charges} recomputed from ${report.priceVersions} price table version(s), total CHF ${microToChf(report.charges.recomputedMicroChf)}` +
      (report.charges.atSupersededVersion ? `, ${report.charges.atSupersededVersion} at a superseded version` : "") +
      (report.charges.refunds
        ? `; ${report.charges.refunds} refund(s) checked against their charges, total CHF ${microToChf(report.charges.refundedMicroChf)}`
        : ""),
    report.readModels
      ? `read models:  ${report.readModels.map((m) => `${m.model} ${m.onlyLive.length || m.onlyRebuilt.length ? "DIFFERS" : "ok"}`).join(", ")}`
      : "read models:  not compared",
  ];
  for (const f of report.findings) {
    const where = f.streamId ? `${f.streamId}${f.version !== undefined ? ` v${f.version}` : ""}` : "-";
    lines.push(`FAIL ${f.kind} ${where}: ${f.message}`);
  }
  if (report.findingCount > report.findings.length) lines.push(`... and ${report.findingCount - report.findings.length} more`);
  const ok = report.readModels
    ? "OK: the log, its checkpoints, the charges and the read models agree"
    : "OK: the log, its checkpoints and the charges agree (the read models were not compared)";
  lines.push(report.findingCount === 0 ? ok : `${report.findingCount} finding(s)`);
  return `${lines.join("\n")}\n`;
}
