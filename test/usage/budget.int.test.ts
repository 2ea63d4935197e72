import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readStream } from "../../src/ledger/eventStore/readStream.ts";
import { silentLogger } from "../../src/observability/logger.ts";
import { budgetRefusalError } from "../../src/api/inference/admission/budgetRefusalError.ts";
import { HoldSweeper } from "../../src/ledger/budget/holdSweeper.ts";
import { placeHold } from "../../src/ledger/budget/placeHold.ts";
import { currentPeriodFigures } from "../../src/ledger/budget/currentPeriodFigures.ts";
import { releaseHold } from "../../src/ledger/budget/releaseHold.ts";
import { foldSettledHold } from "../../src/ledger/budget/foldSettledHold.ts";
import { recordUsage } from "../../src/ledger/budget/recordUsage.ts";
import { completionStreamId, UsageRecordedSchema } from "../../src/ledger/usageRecordedEvent.ts";
import { UsageRecorder } from "../../workers/completion/usageRecorder.ts";
import { createTestDatabase, type TestDatabase } from "../support/testDatabase.ts";
import { budgetRow, createBudgetedAccount, openHolds, setBudget, usageEvent } from "./usageFixtures.ts";

let db: TestDatabase;
/** The worker's path to money: UsageRecorder (recordUsage, group-committed, then foldSettledHold). */
let recorder: UsageRecorder;
beforeAll(async () => {
  db = await createTestDatabase();
  recorder = new UsageRecorder(db.pool);
});
afterAll(async () => {
  await db.drop();
});

const CHF_0_01 = 10_000;
const CHF_0_0001 = 100;

/** One request's life: admission hold, then (if admitted) the job's settle with its actual cost. */
async function flow(accountId: string, now: Date, actualCost: number) {
  const completionId = randomUUID();
  const hold = await placeHold(db.pool, { holdId: completionId, accountId, amountMicroChf: CHF_0_0001, now });
  if (!hold.ok) return { admitted: false as const, reason: hold.reason };
  await new Promise((r) => setTimeout(r, Math.random() * 20));
  expect(await recorder.record(usageEvent({ accountId, completionId, costMicroChf: actualCost, finishedAt: now.toISOString() }).data, {})).toBe("recorded");
  return { admitted: true as const, completionId };
}

async function recordedCosts(completionIds: string[]): Promise<number> {
  let total = 0;
  for (const id of completionIds) {
    const stream = await readStream(db.pool, completionStreamId(id));
    expect(stream.events).toHaveLength(1);
    total += UsageRecordedSchema.parse(stream.events[0]).data.costMicroChf;
  }
  return total;
}

describe("monthly budget holds", () => {
  it("admits at most CHF 0.01 / CHF 0.0001 = 100 of 200 concurrent requests, records spend <= budget and leaves no hold", async () => {
    const now = new Date();
    const accountId = await createBudgetedAccount(db.pool, CHF_0_01);
    const results = await Promise.all(Array.from({ length: 200 }, () => flow(accountId, now, CHF_0_0001)));
    const admitted = results.filter((r) => r.admitted);
    const refused = results.filter((r) => !r.admitted);
    expect(admitted.length).toBeLessThanOrEqual(100);
    expect(admitted.length).toBe(100); // every admitted request costs its whole hold, so exactly the budget is used
    expect(refused.every((r) => r.reason === "monthly_budget_exceeded")).toBe(true);
    const row = await budgetRow(db.pool, accountId, `${now.toISOString().slice(0, 8)}01`);
    const recorded = await recordedCosts(admitted.map((r) => r.completionId!));
    expect(row).toEqual({ budget: CHF_0_01, spent: recorded, held: 0 });
    expect(recorded).toBeLessThanOrEqual(CHF_0_01);
    expect(await openHolds(db.pool, accountId)).toBe(0);
  });

  it("with actual costs below the holds, spend still never passes the budget", async () => {
    const now = new Date();
    const accountId = await createBudgetedAccount(db.pool, CHF_0_01);
    const results = await Promise.all(Array.from({ length: 200 }, () => flow(accountId, now, Math.floor(Math.random() * (CHF_0_0001 + 1)))));
    const admitted = results.filter((r) => r.admitted);
    const row = await budgetRow(db.pool, accountId, `${now.toISOString().slice(0, 8)}01`);
    const recorded = await recordedCosts(admitted.map((r) => r.completionId!));
    expect(row!.spent).toBe(recorded);
    expect(row!.spent).toBeLessThanOrEqual(CHF_0_01);
    expect(row!.held).toBe(0);
    expect(await openHolds(db.pool, accountId)).toBe(0);
  });

  it("resets at the start of the next calendar month (UTC) and says so in the refusal", async () => {
    const endOfJanuary = new Date("2025-01-31T23:59:59.999Z");
    const accountId = await createBudgetedAccount(db.pool, 200);
    expect((await flow(accountId, endOfJanuary, 200)).admitted).toBe(true);
    const refused = await placeHold(db.pool, { holdId: randomUUID(), accountId, amountMicroChf: 1, now: endOfJanuary });
    expect(refused.ok).toBe(false);
    if (refused.ok) return;
    expect(refused.period).toEqual({ start: "2025-01-01", end: "2025-01-31", nextStart: "2025-02-01" });
    const error = budgetRefusalError(refused);
    expect(error.status).toBe(429);
    expect(error.type).toBe("rate_limit_exceeded");
    expect(error.code).toBe("monthly_budget_exceeded");
    expect(error.message).toContain("2025-02-01");
    expect(error.headers).not.toHaveProperty("Retry-After");

    const february = await placeHold(db.pool, { holdId: randomUUID(), accountId, amountMicroChf: 200, now: new Date("2025-02-01T00:00:00.000Z") });
    expect(february.ok).toBe(true);
    expect(await budgetRow(db.pool, accountId, "2025-01-01")).toEqual({ budget: 200, spent: 200, held: 0 });
    expect(await budgetRow(db.pool, accountId, "2025-02-01")).toEqual({ budget: 200, spent: 0, held: 200 });
  });

  it("takes a budget or subscription change into account on the next request", async () => {
    const now = new Date();
    const accountId = await createBudgetedAccount(db.pool, 100);
    expect((await placeHold(db.pool, { holdId: randomUUID(), accountId, amountMicroChf: 100, now })).ok).toBe(true);
    expect((await placeHold(db.pool, { holdId: randomUUID(), accountId, amountMicroChf: 100, now })).ok).toBe(false);
    await setBudget(db.pool, accountId, 300);
    expect((await placeHold(db.pool, { holdId: randomUUID(), accountId, amountMicroChf: 200, now })).ok).toBe(true);
    await setBudget(db.pool, accountId, 250);
    const lowered = await placeHold(db.pool, { holdId: randomUUID(), accountId, amountMicroChf: 1, now });
    expect(lowered).toMatchObject({ ok: false, reason: "monthly_budget_exceeded", budgetMicroChf: 250, heldMicroChf: 300 });
    await setBudget(db.pool, accountId, 1000, "inactive");
    const cancelled = await placeHold(db.pool, { holdId: randomUUID(), accountId, amountMicroChf: 1, now });
    expect(cancelled).toMatchObject({ ok: false, reason: "subscription_required" });
    if (!cancelled.ok) expect(budgetRefusalError(cancelled).status).toBe(402);
    const unknown = await placeHold(db.pool, { holdId: randomUUID(), accountId: randomUUID(), amountMicroChf: 0, now });
    expect(unknown).toMatchObject({ ok: false, reason: "subscription_required" });
  });

  it("charges a completion once, however often (and however concurrently) it is settled", async () => {
    const now = new Date();
    const accountId = await createBudgetedAccount(db.pool, CHF_0_01);
    const completionId = randomUUID();
    expect((await placeHold(db.pool, { holdId: completionId, accountId, amountMicroChf: 500, now })).ok).toBe(true);
    const event = usageEvent({ accountId, completionId, costMicroChf: 321, finishedAt: now.toISOString() });
    // Two workers (each its own recorder and transactions) and one worker twice (one group commit).
    const other = new UsageRecorder(db.pool);
    const outcomes = await Promise.all([recorder.record(event.data, {}), other.record(event.data, {}), recorder.record(event.data, {})]);
    expect(outcomes.sort()).toEqual(["already_recorded", "already_recorded", "recorded"]);
    expect(await recorder.record(event.data, {})).toBe("already_recorded");
    expect(await budgetRow(db.pool, accountId, `${now.toISOString().slice(0, 8)}01`)).toEqual({ budget: CHF_0_01, spent: 321, held: 0 });
    expect((await readStream(db.pool, completionStreamId(completionId))).events).toHaveLength(1);
  });

  it("settles a request admitted at the end of a month and finished in the next: hold released there, cost charged here", async () => {
    const accountId = await createBudgetedAccount(db.pool, CHF_0_01);
    const completionId = randomUUID();
    const admittedAt = new Date("2026-03-31T23:59:59.500Z");
    expect((await placeHold(db.pool, { holdId: completionId, accountId, amountMicroChf: 700, now: admittedAt })).ok).toBe(true);
    expect(await budgetRow(db.pool, accountId, "2026-03-01")).toEqual({ budget: CHF_0_01, spent: 0, held: 700 });
    const settled = await recorder.record(usageEvent({ accountId, completionId, costMicroChf: 250, finishedAt: "2026-04-01T00:00:01.000Z" }).data, {});
    expect(settled).toBe("recorded");
    expect(await budgetRow(db.pool, accountId, "2026-03-01")).toEqual({ budget: CHF_0_01, spent: 0, held: 0 });
    expect(await budgetRow(db.pool, accountId, "2026-04-01")).toEqual({ budget: CHF_0_01, spent: 250, held: 0 });
    expect(await openHolds(db.pool, accountId)).toBe(0);
  });

  it("counts a hold still open from the month before in the new month's admissions, so the month it is charged to stays within its budget", async () => {
    // A probe: a stream admitted at 23:59:39 ran past midnight; January admitted 848 of a 1,000 budget
    // beside it, then charged it 700 more (spent 1,548).
    const accountId = await createBudgetedAccount(db.pool, 1_000);
    const running = randomUUID();
    expect((await placeHold(db.pool, { holdId: running, accountId, amountMicroChf: 834, now: new Date("2026-12-31T23:59:39.700Z") })).ok).toBe(true);
    const january = new Date("2027-01-01T00:00:01.000Z");
    const refused = await placeHold(db.pool, { holdId: randomUUID(), accountId, amountMicroChf: 212, now: january });
    expect(refused).toMatchObject({ ok: false, reason: "monthly_budget_exceeded", heldMicroChf: 834, spentMicroChf: 0 });
    expect(budgetRefusalError(refused as Extract<typeof refused, { ok: false }>).status).toBe(429);
    expect(await currentPeriodFigures(db.pool, accountId, january)).toMatchObject({
      start: "2027-01-01",
      spent_chf: 0,
      held_chf: 0.000834,
      remaining_chf: 0.000166,
    });
    const fits = await placeHold(db.pool, { holdId: randomUUID(), accountId, amountMicroChf: 166, now: january });
    expect(fits).toMatchObject({ ok: true, remainingMicroChf: 0 });
    // The December stream finishes in January: charged there, its hold gone; January stays within its budget.
    expect(await recorder.record(usageEvent({ accountId, completionId: running, costMicroChf: 700, finishedAt: "2027-01-01T00:00:04.910Z" }).data, {})).toBe(
      "recorded",
    );
    const row = await budgetRow(db.pool, accountId, "2027-01-01");
    expect(row).toEqual({ budget: 1_000, spent: 700, held: 166 });
    expect(row!.spent + row!.held).toBeLessThanOrEqual(1_000);
    expect(await budgetRow(db.pool, accountId, "2026-12-01")).toEqual({ budget: 1_000, spent: 0, held: 0 });
    // With the carried hold folded, January admits what its own figures leave: 1,000 - 700 - 166 = 134.
    expect((await placeHold(db.pool, { holdId: randomUUID(), accountId, amountMicroChf: 134, now: january })).ok).toBe(true);
    expect((await placeHold(db.pool, { holdId: randomUUID(), accountId, amountMicroChf: 1, now: january })).ok).toBe(false);
  });

  it("releases the hold of a request that is refused or fails before running, once", async () => {
    const now = new Date();
    const accountId = await createBudgetedAccount(db.pool, 1000);
    const holdId = randomUUID();
    expect((await placeHold(db.pool, { holdId, accountId, amountMicroChf: 700, now })).ok).toBe(true);
    expect(await releaseHold(db.pool, holdId)).toBe(700);
    expect(await releaseHold(db.pool, holdId)).toBeNull();
    expect(await budgetRow(db.pool, accountId, `${now.toISOString().slice(0, 8)}01`)).toEqual({ budget: 1000, spent: 0, held: 0 });
    expect((await placeHold(db.pool, { holdId: randomUUID(), accountId, amountMicroChf: 1000, now })).ok).toBe(true);
  });

  it("sweeps holds older than the maximum age and keeps younger ones", async () => {
    const t0 = new Date("2025-03-10T12:00:00.000Z");
    const accountId = await createBudgetedAccount(db.pool, 1000);
    const old = randomUUID();
    const young = randomUUID();
    expect((await placeHold(db.pool, { holdId: old, accountId, amountMicroChf: 300, now: t0 })).ok).toBe(true);
    expect((await placeHold(db.pool, { holdId: young, accountId, amountMicroChf: 200, now: new Date(t0.getTime() + 50_000) })).ok).toBe(true);
    const sweeper = new HoldSweeper({
      pool: db.pool,
      clock: { now: () => new Date(t0.getTime() + 61_000) },
      logger: silentLogger,
      maxHoldAgeMs: 60_000,
      intervalMs: 0,
    });
    // Other tests of this file left older holds (e.g. February 2025): they are swept too.
    expect(await sweeper.sweepOnce()).toBeGreaterThanOrEqual(1);
    const left = await db.pool.query<{ hold_id: string }>("SELECT hold_id FROM budget_holds WHERE account_id = $1", [accountId]);
    expect(left.rows.map((r) => r.hold_id)).toEqual([young]);
    expect(await budgetRow(db.pool, accountId, "2025-03-01")).toEqual({ budget: 1000, spent: 0, held: 200 });
    // The late job of the swept hold still settles and is charged.
    const settled = await recorder.record(usageEvent({ accountId, completionId: old, costMicroChf: 250, finishedAt: "2025-03-10T12:02:00.000Z" }).data, {});
    expect(settled).toBe("recorded");
    expect(await budgetRow(db.pool, accountId, "2025-03-01")).toEqual({ budget: 1000, spent: 250, held: 200 });
    await sweeper.stop();
  });

  it("admits while another request's usage is being recorded: the durable half of a settle does not lock the budget row", async () => {
    const now = new Date();
    const accountId = await createBudgetedAccount(db.pool, CHF_0_01);
    const completionId = randomUUID();
    expect((await placeHold(db.pool, { holdId: completionId, accountId, amountMicroChf: 500, now })).ok).toBe(true);
    const recording = await db.pool.connect();
    try {
      await recording.query("BEGIN");
      // The usage is written but not committed (as during a slow disk flush).
      expect(await recordUsage(recording, usageEvent({ accountId, completionId, costMicroChf: 321, finishedAt: now.toISOString() }))).toEqual({
        recorded: true,
        releasedMicroChf: 500,
        admission: "admitted",
      });
      const admission = placeHold(db.pool, { holdId: randomUUID(), accountId, amountMicroChf: 100, now });
      const timeout = new Promise<"blocked">((resolve) => setTimeout(() => resolve("blocked"), 2_000));
      const admitted = await Promise.race([admission, timeout]);
      expect(admitted).toMatchObject({ ok: true });
      await recording.query("COMMIT");
    } finally {
      recording.release();
    }
    // Until folded, the settled hold still counts its worst case; the fold charges the actual cost.
    const period = `${now.toISOString().slice(0, 8)}01`;
    expect(await budgetRow(db.pool, accountId, period)).toEqual({ budget: CHF_0_01, spent: 0, held: 600 });
    expect(await foldSettledHold(db.pool, completionId)).toBe(500);
    expect(await foldSettledHold(db.pool, completionId)).toBeNull();
    expect(await budgetRow(db.pool, accountId, period)).toEqual({ budget: CHF_0_01, spent: 321, held: 100 });
  });

  it("folds a settled hold whose fold was lost (a crash between the two halves) from the sweeper, and never releases it uncharged", async () => {
    const t0 = new Date("2025-05-10T12:00:00.000Z");
    const accountId = await createBudgetedAccount(db.pool, 1000);
    const completionId = randomUUID();
    expect((await placeHold(db.pool, { holdId: completionId, accountId, amountMicroChf: 400, now: t0 })).ok).toBe(true);
    await recordUsage(db.pool, usageEvent({ accountId, completionId, costMicroChf: 150, finishedAt: t0.toISOString() }));
    // The hold is settled but not folded: releasing it would drop the charge, so releaseHold refuses.
    expect(await releaseHold(db.pool, completionId)).toBeNull();
    expect(await budgetRow(db.pool, accountId, "2025-05-01")).toEqual({ budget: 1000, spent: 0, held: 400 });
    const sweeper = new HoldSweeper({
      pool: db.pool,
      clock: { now: () => new Date(Date.now() + 11_000) },
      logger: silentLogger,
      maxHoldAgeMs: 10 * 365 * 24 * 3600_000,
      intervalMs: 0,
    });
    expect(await sweeper.sweepOnce()).toBeGreaterThanOrEqual(1);
    expect(await budgetRow(db.pool, accountId, "2025-05-01")).toEqual({ budget: 1000, spent: 150, held: 0 });
    expect(await openHolds(db.pool, accountId)).toBe(0);
  });
});

describe("speculative admission (hold placed while the job is already queued)", () => {
  it("returns the budget left after a hold, for the speculation policy", async () => {
    const accountId = await createBudgetedAccount(db.pool, 1000);
    const now = new Date();
    expect(await placeHold(db.pool, { holdId: randomUUID(), accountId, amountMicroChf: 300, now })).toMatchObject({ ok: true, remainingMicroChf: 700 });
    expect(await placeHold(db.pool, { holdId: randomUUID(), accountId, amountMicroChf: 200, now, speculative: true })).toMatchObject({
      ok: true,
      remainingMicroChf: 500,
    });
  });

  it("records nothing while the admission is undecided, and charges once the hold is there", async () => {
    const now = new Date();
    const accountId = await createBudgetedAccount(db.pool, 1000);
    const completionId = randomUUID();
    const event = usageEvent({ accountId, completionId, costMicroChf: 120, finishedAt: now.toISOString() });
    const undecided = { speculative: true, admissionDecidedBy: new Date(Date.now() + 120_000) };
    const recording = recorder.record(event.data, {}, undecided);
    // Neither the hold nor a refusal is there yet: the recorder waits and writes nothing.
    const waited = await Promise.race([recording, new Promise<"waiting">((resolve) => setTimeout(() => resolve("waiting"), 500))]);
    expect(waited).toBe("waiting");
    expect((await readStream(db.pool, completionStreamId(completionId))).events).toHaveLength(0);
    expect(await openHolds(db.pool, accountId)).toBe(0);

    expect((await placeHold(db.pool, { holdId: completionId, accountId, amountMicroChf: 400, now, speculative: true })).ok).toBe(true);
    expect(await recording).toBe("recorded");
    expect(await budgetRow(db.pool, accountId, `${now.toISOString().slice(0, 8)}01`)).toEqual({ budget: 1000, spent: 120, held: 0 });
    expect(await openHolds(db.pool, accountId)).toBe(0);
    // Settled twice (the hold is folded and gone by now): found recorded, not pending, not charged again.
    expect(await recorder.record(event.data, {}, undecided)).toBe("already_recorded");
    expect(await budgetRow(db.pool, accountId, `${now.toISOString().slice(0, 8)}01`)).toEqual({ budget: 1000, spent: 120, held: 0 });
  });

  it("never charges a job whose speculative admission was refused, even when its settle insists", async () => {
    const now = new Date();
    const accountId = await createBudgetedAccount(db.pool, 100);
    const completionId = randomUUID();
    const refused = await placeHold(db.pool, { holdId: completionId, accountId, amountMicroChf: 500, now, speculative: true });
    expect(refused).toMatchObject({ ok: false, reason: "monthly_budget_exceeded" });
    const marks = await db.pool.query("SELECT count(*)::int AS n FROM refused_holds WHERE hold_id = $1", [completionId]);
    expect(marks.rows[0].n).toBe(1);
    // A careful (non-speculative) refusal leaves no mark: its job was never queued.
    await placeHold(db.pool, { holdId: randomUUID(), accountId, amountMicroChf: 500, now });
    const all = await db.pool.query("SELECT count(*)::int AS n FROM refused_holds");
    expect(all.rows[0].n).toBe(1);

    const event = usageEvent({ accountId, completionId, costMicroChf: 80, finishedAt: now.toISOString() });
    // Undecided, decided (a missing hold would be charged) and not speculative at all: refused each time.
    for (const options of [
      { speculative: true, admissionDecidedBy: new Date(Date.now() + 120_000) },
      { speculative: true, admissionDecidedBy: new Date(0) },
      {},
    ]) {
      expect(await recorder.record(event.data, {}, options)).toBe("refused");
    }
    expect((await readStream(db.pool, completionStreamId(completionId))).events).toHaveLength(0);
    expect(await openHolds(db.pool, accountId)).toBe(0);
    expect(await budgetRow(db.pool, accountId, `${now.toISOString().slice(0, 8)}01`)).toBeNull();
  });

  it("the sweeper deletes refusals after a day", async () => {
    const accountId = await createBudgetedAccount(db.pool, 1);
    const holdId = randomUUID();
    await placeHold(db.pool, { holdId, accountId, amountMicroChf: 5, now: new Date("2025-06-01T00:00:00.000Z"), speculative: true });
    const sweeper = new HoldSweeper({
      pool: db.pool,
      clock: { now: () => new Date("2025-06-02T00:00:01.000Z") },
      logger: silentLogger,
      maxHoldAgeMs: 3600_000,
      intervalMs: 0,
    });
    await sweeper.sweepOnce();
    const left = await db.pool.query("SELECT count(*)::int AS n FROM refused_holds WHERE hold_id = $1", [holdId]);
    expect(left.rows[0].n).toBe(0);
  });
});
