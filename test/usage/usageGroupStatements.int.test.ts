import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPool, type Pool } from "../../src/db/createPool.ts";
import { withTransaction } from "../../src/db/withTransaction.ts";
import { foldSettledHold } from "../../src/ledger/budget/foldSettledHold.ts";
import { placeHold } from "../../src/ledger/budget/placeHold.ts";
import { recordUsage } from "../../src/ledger/budget/recordUsage.ts";
import type { SettleResult } from "../../src/ledger/budget/recordUsages.ts";
import { SettledHoldFolds } from "../../src/ledger/budget/settledHoldFolds.ts";
import { UsageGroupCommit } from "../../src/ledger/budget/usageGroupCommit.ts";
import { completionStreamId, type UsageRecorded } from "../../src/ledger/usageRecordedEvent.ts";
import { createTestDatabase, TEST_POOL_TIMEOUTS, type TestDatabase } from "../support/testDatabase.ts";
import { budgetRow, createBudgetedAccount, usageEvent } from "./usageFixtures.ts";

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db?.drop();
});

const NOW = new Date("2026-05-10T12:00:00.000Z");
const HOLD = 5_000;
const newCompletionId = () => `chatcmpl-${randomUUID().replaceAll("-", "")}`;

type Usage = { event: UsageRecorded; options: { requireAdmission?: boolean } };

/**
 * A group with every case a settle meets, on fresh accounts: two usages of one account, one already
 * recorded, one whose speculative admission was refused, one still pending, one whose hold is missing,
 * one speculative whose hold is there, and two completions named twice (a redelivered job racing its
 * first run): the second naming of the pending one without requireAdmission (so it is recorded).
 */
async function everyCase(): Promise<Usage[]> {
  const accountId = await createBudgetedAccount(db.pool, 10_000_000, NOW);
  const small = await createBudgetedAccount(db.pool, 1_000, NOW);
  const held = async (account = accountId) => {
    const completionId = newCompletionId();
    expect((await placeHold(db.pool, { holdId: completionId, accountId: account, amountMicroChf: HOLD, now: NOW })).ok).toBe(true);
    return completionId;
  };
  const usage = (completionId: string, account = accountId, requireAdmission = false, cost = 120): Usage => ({
    event: usageEvent({ accountId: account, completionId, costMicroChf: cost, finishedAt: NOW.toISOString() }),
    options: { requireAdmission },
  });
  const first = usage(await held(), accountId, false, 100);
  const second = usage(await held(), accountId, false, 200);
  const already = usage(await held());
  expect(await withTransaction(db.pool, (c) => recordUsage(c, already.event))).toMatchObject({ recorded: true });
  const refusedId = newCompletionId();
  expect((await placeHold(db.pool, { holdId: refusedId, accountId: small, amountMicroChf: HOLD, now: NOW, speculative: true })).ok).toBe(false);
  const pendingId = newCompletionId();
  const speculative = usage(await held(), accountId, true);
  return [
    first,
    second,
    already,
    usage(refusedId, small),
    usage(pendingId, accountId, true),
    usage(newCompletionId()),
    speculative,
    first,
    usage(pendingId, accountId, false, 300),
  ];
}

/** `pool`'s clients count every statement they send (BEGIN and COMMIT included) into `sent`. */
function countedPool(url: string): { pool: Pool; sent: { n: number } } {
  const sent = { n: 0 };
  const pool = createPool(url, 4, { timeouts: TEST_POOL_TIMEOUTS });
  pool.on("connect", (client) => {
    const query = client.query.bind(client) as (...args: unknown[]) => unknown;
    (client as { query: unknown }).query = (...args: unknown[]) => {
      sent.n += 1;
      return query(...args);
    };
  });
  return { pool, sent };
}

/** Per completion, how many UsageRecorded events it has; and how many transactions wrote them. */
async function recordedIn(usages: Usage[]): Promise<{ counts: number[]; transactions: number }> {
  const ids = usages.map((u) => completionStreamId(u.event.data.completionId));
  const { rows } = await db.pool.query<{ stream_id: string; tx: string }>(
    "SELECT stream_id, transaction_id::text AS tx FROM es_events WHERE stream_id = ANY($1) AND event_type = 'UsageRecorded'",
    [ids],
  );
  return { counts: ids.map((id) => rows.filter((r) => r.stream_id === id).length), transactions: new Set(rows.map((r) => r.tx)).size };
}

/** The settled state of each usage's hold: its amount and settled cost, or null when there is none. */
async function holdStates(usages: Usage[]): Promise<({ amount: number; settled: number | null } | null)[]> {
  const ids = usages.map((u) => u.event.data.completionId);
  const { rows } = await db.pool.query<{ hold_id: string; amount: string; settled: string | null }>(
    "SELECT hold_id, amount_micro_chf AS amount, settled_cost_micro_chf AS settled FROM budget_holds WHERE hold_id = ANY($1)",
    [ids],
  );
  return ids.map((id) => {
    const row = rows.find((r) => r.hold_id === id);
    return row ? { amount: Number(row.amount), settled: row.settled === null ? null : Number(row.settled) } : null;
  });
}

const EXPECTED: SettleResult[] = [
  { recorded: true, releasedMicroChf: HOLD, admission: "admitted" },
  { recorded: true, releasedMicroChf: HOLD, admission: "admitted" },
  { recorded: false, releasedMicroChf: null, admission: "admitted" },
  { recorded: false, releasedMicroChf: null, admission: "refused" },
  { recorded: false, releasedMicroChf: null, admission: "pending" },
  { recorded: true, releasedMicroChf: null, admission: "admitted" },
  { recorded: true, releasedMicroChf: HOLD, admission: "admitted" },
  { recorded: false, releasedMicroChf: null, admission: "admitted" },
  { recorded: true, releasedMicroChf: null, admission: "admitted" },
];

describe("a group of usages recorded by one statement per stage", () => {
  it("ends every case as recordUsage of each in turn would, in one transaction", async () => {
    // Given the same cases twice, on accounts of their own
    const grouped = await everyCase();
    const oneByOne = await everyCase();
    // When one copy is recorded as one group and the other one usage at a time, in order
    const commits = new UsageGroupCommit(db.pool);
    const groupResults = await Promise.all(grouped.map((u) => commits.record(u.event, {}, u.options)));
    const singleResults: SettleResult[] = [];
    for (const u of oneByOne) singleResults.push(await withTransaction(db.pool, (c) => recordUsage(c, u.event, {}, u.options)));
    // Then both end alike: the same results, the same usages recorded once each, the same holds
    expect(groupResults).toEqual(EXPECTED);
    expect(singleResults).toEqual(EXPECTED);
    const recorded = await recordedIn(grouped);
    expect(recorded.counts).toEqual([1, 1, 1, 0, 1, 1, 1, 1, 1]);
    expect((await recordedIn(oneByOne)).counts).toEqual(recorded.counts);
    expect(await holdStates(grouped)).toEqual(await holdStates(oneByOne));
    expect(await holdStates(grouped)).toEqual([
      { amount: HOLD, settled: 100 },
      { amount: HOLD, settled: 200 },
      { amount: HOLD, settled: 120 },
      null,
      { amount: 0, settled: 300 },
      { amount: 0, settled: 120 },
      { amount: HOLD, settled: 120 },
      { amount: HOLD, settled: 100 },
      { amount: 0, settled: 300 },
    ]);
    // And the group's new usages were written by the one group transaction (the earlier one by its own)
    expect(recorded.transactions).toBe(2);
  });

  it("records a group of 50 with five statements (BEGIN, admission, append, settled mark, COMMIT) and folds it with one", async () => {
    // Given 50 admitted requests of two accounts, and a pool that counts its statements
    const accounts = [await createBudgetedAccount(db.pool, 10_000_000, NOW), await createBudgetedAccount(db.pool, 10_000_000, NOW)];
    const usages: UsageRecorded[] = [];
    for (let i = 0; i < 50; i++) {
      const accountId = accounts[i % 2]!;
      const completionId = newCompletionId();
      expect((await placeHold(db.pool, { holdId: completionId, accountId, amountMicroChf: HOLD, now: NOW })).ok).toBe(true);
      usages.push(usageEvent({ accountId, completionId, costMicroChf: 100 + i, finishedAt: NOW.toISOString() }));
    }
    const { pool, sent } = countedPool(db.url);
    try {
      // When they finish together: recorded as one group, then folded as one group
      const commits = new UsageGroupCommit(pool);
      const recorded = await Promise.all(usages.map((e) => commits.record(e)));
      // Then the durable half took five statements in all, not four or five per usage
      expect(recorded).toEqual(usages.map(() => ({ recorded: true, releasedMicroChf: HOLD, admission: "admitted" })));
      expect(sent.n).toBe(5);
      sent.n = 0;
      const folds = new SettledHoldFolds(pool);
      expect(await Promise.all(usages.map((e) => folds.fold(e.data.completionId)))).toEqual(usages.map(() => HOLD));
      // And the fold one
      expect(sent.n).toBe(1);
    } finally {
      await pool.end();
    }
    for (const [a, accountId] of accounts.entries()) {
      const spent = usages.filter((_, i) => i % 2 === a).reduce((sum, e) => sum + e.data.costMicroChf, 0);
      expect(await budgetRow(db.pool, accountId, "2026-05-01")).toEqual({ budget: 10_000_000, spent, held: 0 });
    }
    expect((await recordedIn(usages.map((event) => ({ event, options: {} })))).transactions).toBe(1);
  });

  it("folds a group as foldSettledHold of each in turn would: one account's holds, a month crossed, a hold named twice, one not settled", async () => {
    // Given the same holds twice on accounts of their own: three of one account settled, one of them
    // placed on the last second of April and finished in May, one hold of another account, one not settled
    const scenario = async () => {
      const [accountId, other] = [await createBudgetedAccount(db.pool, 1_000_000, NOW), await createBudgetedAccount(db.pool, 1_000_000, NOW)];
      const ids: string[] = [];
      const place = async (account: string, placedAt: Date, finishedAt: Date | null, cost: number) => {
        const completionId = newCompletionId();
        expect((await placeHold(db.pool, { holdId: completionId, accountId: account, amountMicroChf: 1_000, now: placedAt })).ok).toBe(true);
        if (finishedAt) await recordUsage(db.pool, usageEvent({ accountId: account, completionId, costMicroChf: cost, finishedAt: finishedAt.toISOString() }));
        ids.push(completionId);
      };
      await place(accountId, NOW, NOW, 100);
      await place(accountId, NOW, NOW, 200);
      await place(accountId, new Date("2026-04-30T23:59:59.000Z"), new Date("2026-05-01T00:00:01.000Z"), 300);
      await place(other, NOW, NOW, 400);
      await place(accountId, NOW, null, 0);
      return { accounts: [accountId, other], holdIds: [...ids.slice(0, 2), ids[0]!, ...ids.slice(2)] };
    };
    const grouped = await scenario();
    const oneByOne = await scenario();
    // When one copy is folded as one group and the other one hold at a time
    const folds = new SettledHoldFolds(db.pool);
    const groupReleased = await Promise.all(grouped.holdIds.map((id) => folds.fold(id)));
    const singleReleased: (number | null)[] = [];
    for (const id of oneByOne.holdIds) singleReleased.push(await foldSettledHold(db.pool, id));
    // Then both release the same amounts and leave the same budget rows
    expect(groupReleased).toEqual([1_000, 1_000, null, 1_000, 1_000, null]);
    expect(singleReleased).toEqual(groupReleased);
    const rows = async ({ accounts }: { accounts: string[] }) =>
      Promise.all(accounts.flatMap((a) => ["2026-04-01", "2026-05-01"].map((period) => budgetRow(db.pool, a, period))));
    expect(await rows(grouped)).toEqual([
      { budget: 1_000_000, spent: 0, held: 0 },
      { budget: 1_000_000, spent: 600, held: 1_000 },
      null,
      { budget: 1_000_000, spent: 400, held: 0 },
    ]);
    expect(await rows(oneByOne)).toEqual(await rows(grouped));
  });

  it("when the group's statement fails (one usage breaks a constraint), records every other usage on its own and fails that one only", async () => {
    // Given ten admitted requests, one of whose usages names an account id that is not a uuid
    const accountId = await createBudgetedAccount(db.pool, 10_000_000, NOW);
    const usages: UsageRecorded[] = [];
    for (let i = 0; i < 10; i++) {
      const completionId = newCompletionId();
      expect((await placeHold(db.pool, { holdId: completionId, accountId, amountMicroChf: HOLD, now: NOW })).ok).toBe(true);
      usages.push(usageEvent({ accountId: i === 4 ? "not-a-uuid" : accountId, completionId, costMicroChf: 100, finishedAt: NOW.toISOString() }));
    }
    // When they are recorded as one group
    const commits = new UsageGroupCommit(db.pool);
    const results = await Promise.allSettled(usages.map((e) => commits.record(e)));
    // Then the group rolled back and each was recorded alone: nine once each, in nine transactions
    results.forEach((result, i) => {
      if (i === 4) expect(result).toMatchObject({ status: "rejected", reason: { code: "22P02" } });
      else expect(result).toEqual({ status: "fulfilled", value: { recorded: true, releasedMicroChf: HOLD, admission: "admitted" } });
    });
    const recorded = await recordedIn(usages.map((event) => ({ event, options: {} })));
    expect(recorded.counts).toEqual(usages.map((_, i) => (i === 4 ? 0 : 1)));
    expect(recorded.transactions).toBe(9);
    // And the failing one left nothing: its hold is not settled
    expect((await holdStates(usages.map((event) => ({ event, options: {} }))))[4]).toEqual({ amount: HOLD, settled: null });
  });
});
