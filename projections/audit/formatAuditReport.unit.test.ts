import { describe, expect, it } from "vitest";
import { formatAuditReport } from "./formatAuditReport.ts";
import type { AuditReport } from "./verifyAudit.ts";

const clean: AuditReport = {
  chains: { events: 3, streams: 1, preChainEvents: 0 } as AuditReport["chains"],
  sealedStreams: 0,
  checkpoints: { checkpoints: 0, streamHeads: 0, signed: 0, badlySigned: 0, unsigned: 0, keyIds: [], keysTrusted: false },
  signedHeads: null,
  charges: { charges: 1, recomputedMicroChf: 5, atSupersededVersion: 0, refunds: 0, refundedMicroChf: 0 },
  priceVersions: 1,
  readModels: [],
  findings: [],
  findingCount: 0,
};

describe("formatAuditReport", () => {
  it("says the read models agree only when they were compared", () => {
    expect(formatAuditReport(clean)).toContain("OK: the log, its checkpoints, the charges and the read models agree");
    const skipped = formatAuditReport({ ...clean, readModels: null });
    expect(skipped).toContain("read models:  not compared");
    expect(skipped).toContain("OK: the log, its checkpoints and the charges agree (the read models were not compared)");
    expect(skipped).not.toContain("read models agree");
  });

  it("counts the refunds checked against their charges", () => {
    expect(formatAuditReport({ ...clean, charges: { ...clean.charges, refunds: 2, refundedMicroChf: 3_000 } })).toContain(
      "2 refund(s) checked against their charges, total CHF 0.003",
    );
  });

  it("checkpoints signed by a key not trusted are counted as signed but not verified, not as unsigned", () => {
    const line = formatAuditReport({
      ...clean,
      checkpoints: { checkpoints: 15, streamHeads: 40, signed: 0, badlySigned: 15, unsigned: 0, keyIds: [], keysTrusted: true },
      findingCount: 15,
    });
    expect(line).toContain("signatures:   0 signed, 15 signed but not verified (see the findings), 0 unsigned");
    expect(line).not.toContain("UNSIGNED");
  });
});
