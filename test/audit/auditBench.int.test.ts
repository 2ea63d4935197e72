import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { measureAudit, type AuditBenchResult } from "../../bench/audit/measureAudit.ts";
import { verifyAudit } from "../../projections/audit/verifyAudit.ts";
import { operatorEdit } from "../support/operatorEdit.ts";
import { createTestDatabase, type TestDatabase } from "../support/testDatabase.ts";

/**
 * The audit benchmark (`npm run bench:audit`) at a reduced size: the bulk-built log verifies, the
 * replays agree with the live read models, and every charge is recomputed. Correctness only: the
 * figures depend on the machine (docs/benchmarks.md has the full-size run).
 */
const EVENTS = 20_000;
let db: TestDatabase;
let result: AuditBenchResult;

beforeAll(async () => {
  db = await createTestDatabase();
  result = await measureAudit(db.pool, EVENTS);
}, 300_000);
afterAll(async () => {
  await db.drop();
});

describe(`audit benchmark at ${EVENTS} events`, () => {
  it("builds the log, replays and verifies it with no finding and no read model difference", () => {
    expect(result.build.events).toBe(EVENTS);
    expect(result.build.accounts).toBeGreaterThan(50);
    expect(result.verify.findings).toEqual([]);
    expect(result.verify.chains.events).toBe(EVENTS + result.verify.checkpoints.checkpoints);
    expect(result.verify.charges.charges).toBe(result.build.completions);
    expect(result.verify.charges.recomputedMicroChf).toBe(result.build.costMicroChf);
    // Bounded checkpoints (at most 10,000 events each) that list every stream at least once.
    expect(result.verify.checkpoints.checkpoints).toBeGreaterThanOrEqual(Math.ceil(EVENTS / 10_000));
    expect(result.verify.checkpoints.streamHeads).toBeGreaterThanOrEqual(result.build.completions + result.build.accounts + 1);
    expect(result.compare.differences).toBe(0);
    expect(result.compare.eventsRead).toBe(result.verify.chains.events);
    expect(result.projected).toBe(result.verify.chains.events);
    for (const phase of result.phases) expect(phase.eventsPerSecond).toBeGreaterThan(0);
  });

  it("then names one changed usage event among the 20,000", async () => {
    const target = await db.pool.query<{ stream_id: string }>(
      "SELECT stream_id FROM es_events WHERE event_type = 'UsageRecorded' ORDER BY global_position OFFSET 12345 LIMIT 1",
    );
    const stream = target.rows[0]!.stream_id;
    await operatorEdit(db.pool, (c) => c.query("UPDATE es_events SET data = jsonb_set(data, '{promptTokens}', '1') WHERE stream_id = $1", [stream]));
    const report = await verifyAudit(db.pool, { readModels: false });
    expect(report.findings.map((f) => `${f.kind} ${f.streamId} v${f.version}`).sort()).toEqual([`chain ${stream} v1`, `charge ${stream} v1`]);
  });
});
