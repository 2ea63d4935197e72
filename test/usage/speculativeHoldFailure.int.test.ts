import { randomUUID } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AdmissionDeps, admitWithHold, FAILED_HOLD_RESOLVE_MS } from "../../src/api/inference/admission/admitWithHold.ts";
import type { HoldableModel, HoldableWork } from "../../src/api/inference/admission/jobHoldMicroChf.ts";
import { SpeculationPolicy } from "../../src/api/inference/admission/speculationPolicy.ts";
import { createPool, type Pool, shortStatements } from "../../src/db/createPool.ts";
import { placeHold } from "../../src/ledger/budget/placeHold.ts";
import { refuseHold } from "../../src/ledger/budget/refuseHold.ts";
import { settleUndeliveredReplies } from "../../src/ledger/budget/undeliveredReplies.ts";
import { releaseHold } from "../../src/ledger/budget/releaseHold.ts";
import { readStream } from "../../src/ledger/eventStore/readStream.ts";
import { completionStreamId } from "../../src/ledger/usageRecordedEvent.ts";
import { createMetrics } from "../../src/observability/metrics.ts";
import { UsageRecorder } from "../../workers/completion/usageRecorder.ts";
import { eventually } from "../support/eventually.ts";
import { createTestDatabase, TEST_POOL_TIMEOUTS, type TestDatabase } from "../support/testDatabase.ts";
import { budgetRow, createBudgetedAccount, openHolds, usageEvent } from "./usageFixtures.ts";

/**
 * admitWithHold's speculative path when the hold statement FAILS rather than is refused (the job is
 * already queued, and may have finished): the request is answered with the error and its job is never
 * charged (its refusal is recorded, where the worker's settle looks first), unless the hold turns out
 * to have been placed after all (its statement committed unseen), which admits the request.
 */
let db: TestDatabase;
/** The API's hold pool: a short statement timeout, as PG_API_STATEMENT_TIMEOUT_MS (1 s) but shorter. */
let apiPool: Pool;
let recorder: UsageRecorder;
beforeAll(async () => {
  db = await createTestDatabase();
  apiPool = createPool(db.url, 4, { timeouts: shortStatements(TEST_POOL_TIMEOUTS, 300) });
  recorder = new UsageRecorder(db.pool);
});
afterAll(async () => {
  await apiPool?.end();
  await db?.drop();
});

const WORK: HoldableWork = { kind: "chat", request: { maxTokens: 3 } };
const MODEL: HoldableModel = { context_length: 1024, inputMicroChfPerMillion: 1_000_000, outputMicroChfPerMillion: 1_000_000 };
const BUDGET = 1_000_000_000;
const period = () => `${new Date().toISOString().slice(0, 8)}01`;

/** Speculative for every account (its budget was seen ample just now). */
function depsWith(pool: Pool): AdmissionDeps {
  const policy = new SpeculationPolicy();
  policy.maySpeculate = () => true;
  return { pool, clock: { now: () => new Date() }, policy, metrics: createMetrics({ defaultMetrics: false }) };
}

/** A job that is queued at once, and what admission did with it. */
function fakeJob() {
  const seen = { started: 0, speculative: null as boolean | null, cancelled: 0, admitted: 0, released: 0 };
  return {
    seen,
    job: {
      start: async (speculative: boolean, onQueued?: () => void) => {
        seen.started++;
        seen.speculative = speculative;
        onQueued?.();
        return { release: () => void seen.released++ };
      },
      cancel: async () => void seen.cancelled++,
      admitted: () => void seen.admitted++,
    },
  };
}

/** `pool`, with its named statements (placeHold's, refuseHold's) going through `hook` first. */
function hooked(pool: Pool, hook: (name: string, run: () => Promise<unknown>) => Promise<unknown>): Pool {
  return new Proxy(pool, {
    get(target, prop, receiver) {
      if (prop === "query")
        return (config: unknown, values?: unknown) => {
          const run = () => (target.query as (c: unknown, v?: unknown) => Promise<unknown>)(config, values);
          const name = typeof config === "object" && config !== null ? (config as { name?: string }).name : undefined;
          return name ? hook(name, run) : run();
        };
      const value = Reflect.get(target, prop, receiver);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

const connectionLost = () => new Error("Connection terminated unexpectedly");
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function refusals(holdId: string): Promise<number> {
  return (await db.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM refused_holds WHERE hold_id = $1", [holdId])).rows[0]!.n;
}

/** What the worker does with the job's usage once ADMISSION_DECIDED_WITHIN_MS passed without a decision (the old charge). */
async function settleAfterTheDeadline(accountId: string, completionId: string) {
  const event = usageEvent({ accountId, completionId, costMicroChf: 70 });
  return recorder.record(event.data, {}, { speculative: true, admissionDecidedBy: new Date(0) });
}

describe("a speculative hold that fails", () => {
  it("on the statement timeout (the account's budget row locked): answers with the error, cancels the job and records its refusal", async () => {
    const accountId = await createBudgetedAccount(db.pool, BUDGET);
    const completionId = randomUUID();
    // The account's budget row exists (an earlier admission) and another session holds it.
    const earlier = randomUUID();
    expect((await placeHold(db.pool, { holdId: earlier, accountId, amountMicroChf: 1, now: new Date() })).ok).toBe(true);
    await releaseHold(db.pool, earlier);
    const locker = new pg.Client({ connectionString: db.url });
    await locker.connect();
    const { job, seen } = fakeJob();
    let error: unknown;
    try {
      await locker.query("BEGIN");
      await locker.query("SELECT 1 FROM rm_budget WHERE account_id = $1 FOR UPDATE", [accountId]);
      error = await admitWithHold(depsWith(apiPool), { completionId, accountId, work: WORK, model: MODEL }, job).then(
        () => null,
        (e: unknown) => e,
      );
    } finally {
      await locker.query("ROLLBACK").catch(() => undefined);
      await locker.end();
    }
    expect(error).toBeInstanceOf(pg.DatabaseError);
    expect((error as pg.DatabaseError).code).toBe("57014");
    expect(seen).toMatchObject({ started: 1, speculative: true, cancelled: 1, admitted: 0 });
    expect(await refusals(completionId)).toBe(1);
    // The worker never charges it, not even once it stops waiting for the admission.
    expect(await settleAfterTheDeadline(accountId, completionId)).toBe("refused");
    expect((await readStream(db.pool, completionStreamId(completionId))).events).toHaveLength(0);
    expect(await budgetRow(db.pool, accountId, period())).toEqual({ budget: BUDGET, spent: 0, held: 0 });
    expect(await openHolds(db.pool, accountId)).toBe(0);
  });

  it("in doubt, its statement committed unseen: the request is admitted after all and charged as any", async () => {
    const accountId = await createBudgetedAccount(db.pool, BUDGET);
    const completionId = randomUUID();
    const pool = hooked(apiPool, async (name, run) => {
      if (name !== "place-budget-hold-v3") return run();
      await run();
      throw connectionLost();
    });
    const { job, seen } = fakeJob();
    const started = await admitWithHold(depsWith(pool), { completionId, accountId, work: WORK, model: MODEL }, job);
    expect(started).toBeDefined();
    expect(seen).toMatchObject({ started: 1, speculative: true, cancelled: 0, admitted: 1, released: 0 });
    expect(await refusals(completionId)).toBe(0);
    expect(await openHolds(db.pool, accountId)).toBe(1);
    expect(await settleAfterTheDeadline(accountId, completionId)).toBe("recorded");
    expect(await budgetRow(db.pool, accountId, period())).toEqual({ budget: BUDGET, spent: 70, held: 0 });
  });

  it("in doubt, its statement not committed: answers with the error and records the refusal", async () => {
    const accountId = await createBudgetedAccount(db.pool, BUDGET);
    const completionId = randomUUID();
    const pool = hooked(apiPool, async (name, run) => {
      if (name === "place-budget-hold-v3") throw connectionLost();
      return run();
    });
    const { job, seen } = fakeJob();
    await expect(admitWithHold(depsWith(pool), { completionId, accountId, work: WORK, model: MODEL }, job)).rejects.toThrow(
      "Connection terminated unexpectedly",
    );
    expect(seen).toMatchObject({ cancelled: 1, admitted: 0 });
    expect(await refusals(completionId)).toBe(1);
    expect(await settleAfterTheDeadline(accountId, completionId)).toBe("refused");
    expect((await readStream(db.pool, completionStreamId(completionId))).events).toHaveLength(0);
  });

  it("in doubt, placed unseen, and PostgreSQL does not answer in time: answers with the error, refuses in the background and releases the hold", async () => {
    for (const silence of ["fails", "slow"] as const) {
      const accountId = await createBudgetedAccount(db.pool, BUDGET);
      const completionId = randomUUID();
      let refuseCalls = 0;
      const pool = hooked(apiPool, async (name, run) => {
        if (name === "place-budget-hold-v3") {
          await run();
          throw connectionLost();
        }
        if (name === "refuse-budget-hold-v2" && refuseCalls++ === 0) {
          // The first attempt (asking whether the hold is there): lost, or answered too late (it then finds the hold).
          if (silence === "fails") throw connectionLost();
          await sleep(FAILED_HOLD_RESOLVE_MS * 2);
        }
        return run();
      });
      const { job, seen } = fakeJob();
      const began = Date.now();
      await expect(admitWithHold(depsWith(pool), { completionId, accountId, work: WORK, model: MODEL }, job)).rejects.toThrow(
        "Connection terminated unexpectedly",
      );
      expect(Date.now() - began).toBeLessThan(FAILED_HOLD_RESOLVE_MS + 500);
      expect(seen, silence).toMatchObject({ cancelled: 1, admitted: 0, released: 1 });
      // The refusal lands, then the hold placed unseen is released.
      await eventually(async () => ((await refusals(completionId)) === 1 && (await openHolds(db.pool, accountId)) === 0 ? true : undefined), 5_000);
      expect(await budgetRow(db.pool, accountId, period())).toEqual({ budget: BUDGET, spent: 0, held: 0 });
      expect(await settleAfterTheDeadline(accountId, completionId)).toBe("refused");
      expect((await readStream(db.pool, completionStreamId(completionId))).events).toHaveLength(0);
    }
  });
  it("in doubt, placed unseen, its job charged before the refusal lands (a partition): the client's error stands and the charge is refunded whole", async () => {
    const accountId = await createBudgetedAccount(db.pool, BUDGET);
    const completionId = randomUUID();
    let refuseCalls = 0;
    const pool = hooked(apiPool, async (name, run) => {
      if (name === "place-budget-hold-v3") {
        await run();
        throw connectionLost();
      }
      if (name === "refuse-budget-hold-v2" && refuseCalls++ === 0) {
        // PostgreSQL silent to the API while the job finishes and its worker, which sees the hold, records its usage.
        await sleep(FAILED_HOLD_RESOLVE_MS * 2);
        expect(await settleAfterTheDeadline(accountId, completionId)).toBe("recorded");
      }
      return run();
    });
    const { job, seen } = fakeJob();
    await expect(admitWithHold(depsWith(pool), { completionId, accountId, work: WORK, model: MODEL }, job)).rejects.toThrow(
      "Connection terminated unexpectedly",
    );
    expect(seen).toMatchObject({ cancelled: 1, admitted: 0 });
    await eventually(async () => ((await refusals(completionId)) === 1 ? true : undefined), 5_000);
    expect(await budgetRow(db.pool, accountId, period())).toEqual({ budget: BUDGET, spent: 70, held: 0 });
    // The projector's sweeper settles the reply noted undelivered: the whole charge back.
    const refunds = await settleUndeliveredReplies(db.pool, { now: new Date(), noteMaxAgeMs: 60_000 });
    expect(refunds).toMatchObject([{ completionId, costMicroChf: 70, reason: "undelivered", deliveredCompletionTokens: null }]);
    expect(await budgetRow(db.pool, accountId, period())).toEqual({ budget: BUDGET, spent: 0, held: 0 });
    expect((await readStream(db.pool, completionStreamId(completionId))).events.map((e) => e.type)).toEqual(["UsageRecorded", "UsageRefunded"]);
  });
});

describe("refuseHold", () => {
  it("records a refusal unless the hold or the usage is there (unlessPlaced), or whatever is there, idempotently", async () => {
    const accountId = await createBudgetedAccount(db.pool, BUDGET);
    const missing = randomUUID();
    expect(await refuseHold(db.pool, { holdId: missing, now: new Date(), unlessPlaced: true })).toEqual({ refused: true, placed: false, charged: false });
    expect(await refuseHold(db.pool, { holdId: missing, now: new Date(), unlessPlaced: true })).toEqual({ refused: true, placed: false, charged: false });
    expect(await refusals(missing)).toBe(1);

    const charged = randomUUID();
    await recorder.record(usageEvent({ accountId, completionId: charged, costMicroChf: 5 }).data, {});
    expect(await refuseHold(db.pool, { holdId: charged, now: new Date(), unlessPlaced: true })).toEqual({ refused: false, placed: true, charged: true });
    expect(await refusals(charged)).toBe(0);
    // Too late for the charge, which stands (recorded once), but said so.
    expect(await refuseHold(db.pool, { holdId: charged, now: new Date(), unlessPlaced: false })).toEqual({ refused: true, placed: true, charged: true });
    expect(await recorder.record(usageEvent({ accountId, completionId: charged, costMicroChf: 5 }).data, {})).toBe("refused");
    expect((await readStream(db.pool, completionStreamId(charged))).events).toHaveLength(1);
  });
});

describe("the worker's settle of a speculative job refused by the API's cancel", () => {
  it("records nothing once the refusal is known, while the admission is pending, even before it is in PostgreSQL", async () => {
    const accountId = await createBudgetedAccount(db.pool, BUDGET);
    const completionId = randomUUID();
    let refused = false;
    const recording = recorder.record(
      usageEvent({ accountId, completionId }).data,
      {},
      {
        speculative: true,
        admissionDecidedBy: new Date(Date.now() + 120_000),
        refused: () => refused,
      },
    );
    expect(await Promise.race([recording, sleep(300).then(() => "waiting")])).toBe("waiting");
    refused = true;
    expect(await recording).toBe("refused");
    // Past the deadline too (a hold that is missing would be charged): refused.
    expect(
      await recorder.record(usageEvent({ accountId, completionId }).data, {}, { speculative: true, admissionDecidedBy: new Date(0), refused: () => true }),
    ).toBe("refused");
    expect((await readStream(db.pool, completionStreamId(completionId))).events).toHaveLength(0);
  });

  it("while PostgreSQL is unreachable: stops retrying once refused, and records nothing when it answers again", async () => {
    const accountId = await createBudgetedAccount(db.pool, BUDGET);
    const completionId = randomUUID();
    let down = true;
    const unreachable = () => Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED" });
    const flaky = new Proxy(db.pool, {
      get(target, prop, receiver) {
        if (prop === "connect" || prop === "query")
          return (...args: unknown[]) =>
            down ? Promise.reject(unreachable()) : (Reflect.get(target, prop, receiver) as (...a: unknown[]) => unknown).apply(target, args);
        const value = Reflect.get(target, prop, receiver);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    let attempts = 0;
    const outage = new UsageRecorder(flaky, { maxPauseMs: 50, onRetry: () => void attempts++ });
    let refused = false;
    // Past its deadline: without the refusal, the usage would be charged as soon as PostgreSQL answers.
    const recording = outage.record(
      usageEvent({ accountId, completionId }).data,
      {},
      { speculative: true, admissionDecidedBy: new Date(0), refused: () => refused },
    );
    await eventually(async () => (attempts >= 2 ? true : undefined), 5_000);
    refused = true;
    down = false;
    expect(await recording).toBe("refused");
    expect((await readStream(db.pool, completionStreamId(completionId))).events).toHaveLength(0);
    expect(await openHolds(db.pool, accountId)).toBe(0);
  });
});
