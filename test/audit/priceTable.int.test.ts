import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { verifyAudit } from "../../projections/audit/verifyAudit.ts";
import { writeAuditCheckpoints } from "../../src/ledger/audit/auditCheckpoint.ts";
import { publishPriceTable, readPriceVersions } from "../../src/ledger/pricing/priceTable.ts";
import { UsageRecorder } from "../../workers/completion/usageRecorder.ts";
import { ModelRegistry } from "../../src/models/modelRegistry.ts";
import { createTestDatabase, type TestDatabase } from "../support/testDatabase.ts";
import { usageEvent } from "../usage/usageFixtures.ts";
import { buildAuditedLog, PRICES_V1, PRICES_V2 } from "./auditFixtures.ts";

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});

describe("price table versions", () => {
  it("publishes once per price change, under the registry's label, or label+digest when the label already named other prices", async () => {
    const published = await Promise.all(Array.from({ length: 8 }, () => publishPriceTable(db.pool, "2026-01", PRICES_V1, new Date())));
    expect(new Set(published)).toEqual(new Set(["2026-01"]));
    expect(await publishPriceTable(db.pool, "2026-01", PRICES_V1, new Date())).toBe("2026-01");
    const changed = await publishPriceTable(db.pool, "2026-01", PRICES_V2, new Date());
    expect(changed).toMatch(/^2026-01\+[0-9a-f]{12}$/);
    expect(await publishPriceTable(db.pool, "2026-01", PRICES_V2, new Date())).toBe(changed);
    expect(await publishPriceTable(db.pool, "2026-02", PRICES_V2, new Date())).toBe("2026-02");
    const versions = await readPriceVersions(db.pool);
    expect(versions.map((v) => [v.version, v.models])).toEqual([
      ["2026-01", PRICES_V1],
      [changed, PRICES_V2],
      ["2026-02", PRICES_V2],
    ]);
  });

  it("a registry charges under the version it was published as", () => {
    const registry = new ModelRegistry("2026-01", []);
    expect(registry.withPriceTableVersion("2026-01")).toBe(registry);
    expect(registry.withPriceTableVersion("2026-01+abc").priceTableVersion).toBe("2026-01+abc");
  });

  it("verify names a charge at an unpublished version and one computed before its version took effect", async () => {
    await buildAuditedLog(db.pool, 1);
    const future = await publishPriceTable(
      db.pool,
      "future",
      { "tiny-test": { inputMicroChfPerMillion: 1, outputMicroChfPerMillion: 1 } },
      new Date(Date.now() + 3600_000),
    );
    const accountId = (await db.pool.query<{ id: string }>("SELECT account_id::text AS id FROM rm_accounts LIMIT 1")).rows[0]!.id;
    const early = usageEvent({ accountId, promptTokens: 0, completionTokens: 0, costMicroChf: 0, priceTableVersion: future });
    const unknown = usageEvent({ accountId, promptTokens: 0, completionTokens: 0, costMicroChf: 0, priceTableVersion: "never-published" });
    const recorder = new UsageRecorder(db.pool);
    expect(await Promise.all([recorder.record(early.data, {}), recorder.record(unknown.data, {})])).toEqual(["recorded", "recorded"]);
    // Checkpoints of at most 2 events each: many small windows, all of which verify.
    await writeAuditCheckpoints(db.pool, { maxEvents: 2 });
    const report = await verifyAudit(db.pool, { readModels: false });
    expect(report.checkpoints.checkpoints).toBeGreaterThanOrEqual(2);
    expect(report.findings).toHaveLength(2);
    expect(report.findings).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          kind: "charge",
          streamId: `completion-${early.data.completionId}`,
          message: expect.stringContaining("before it took effect"),
        }),
        expect.objectContaining({ kind: "charge", streamId: `completion-${unknown.data.completionId}`, message: expect.stringContaining("never published") }),
      ]),
    );
  });
});
