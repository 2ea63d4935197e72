import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { UsageRecordedData } from "../../src/ledger/usageRecordedEvent.ts";
import { UsageRecorder } from "../../workers/completion/usageRecorder.ts";
import { placeHold } from "../../src/ledger/budget/placeHold.ts";
import { createTestDatabase, type TestDatabase } from "../support/testDatabase.ts";
import { budgetRow, createBudgetedAccount } from "../usage/usageFixtures.ts";

const period = () => `${new Date().toISOString().slice(0, 8)}01`;
import { completionEvents } from "./inferenceSteps.ts";

describe("UsageRecorder", () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  it("records a completion's usage once: a retried job finds it already recorded", async () => {
    const recorder = new UsageRecorder(db.pool);
    const completionId = `chatcmpl-${randomUUID().replaceAll("-", "")}`;
    const data: UsageRecordedData = {
      completionId,
      accountId: randomUUID(),
      keyId: randomUUID(),
      model: "m",
      endpoint: "chat.completions",
      promptTokens: 10,
      completionTokens: 5,
      reasoningTokens: 0,
      costMicroChf: 3,
      priceTableVersion: "v1",
      outcome: "finished",
      startedAt: new Date().toISOString(),
      finishedAt: new Date().toISOString(),
      traceId: null,
    };
    expect(await recorder.record(data, { actor: "worker", correlationId: completionId })).toBe("recorded");
    expect(await recorder.record({ ...data, completionTokens: 7 }, { actor: "worker" })).toBe("already_recorded");
    const both = await Promise.all([recorder.record(data, {}), recorder.record(data, {})]);
    expect(both).toEqual(["already_recorded", "already_recorded"]);
    const events = await completionEvents(db.pool, completionId);
    expect(events).toHaveLength(1);
    expect(events[0]!.data.completionTokens).toBe(5);
    expect(events[0]!.metadata).toMatchObject({ actor: "worker", correlationId: completionId });
  });

  it("lets only one of two concurrent first records win", async () => {
    const recorder = new UsageRecorder(db.pool);
    const completionId = `cmpl-${randomUUID().replaceAll("-", "")}`;
    const base = {
      completionId,
      accountId: randomUUID(),
      keyId: randomUUID(),
      model: "m",
      endpoint: "completions" as const,
      promptTokens: 1,
      completionTokens: 1,
      reasoningTokens: 0,
      costMicroChf: 0,
      priceTableVersion: "v1",
      outcome: "finished" as const,
      startedAt: new Date().toISOString(),
      finishedAt: new Date().toISOString(),
      traceId: null,
    };
    const results = await Promise.all([recorder.record(base, {}), recorder.record({ ...base, promptTokens: 2 }, {})]);
    expect(results.sort()).toEqual(["already_recorded", "recorded"]);
    expect(await completionEvents(db.pool, completionId)).toHaveLength(1);
  });

  describe("a speculatively admitted job", () => {
    const usageOf = (accountId: string, completionId: string): UsageRecordedData => ({
      completionId,
      accountId,
      keyId: randomUUID(),
      model: "m",
      endpoint: "chat.completions",
      promptTokens: 3,
      completionTokens: 4,
      reasoningTokens: 0,
      costMicroChf: 9,
      priceTableVersion: "v1",
      outcome: "finished",
      startedAt: new Date().toISOString(),
      finishedAt: new Date().toISOString(),
      traceId: null,
    });

    it("waits for its hold (placed after the job finished) and then records", async () => {
      const recorder = new UsageRecorder(db.pool);
      const accountId = await createBudgetedAccount(db.pool, 1000);
      const completionId = randomUUID();
      const recording = recorder.record(usageOf(accountId, completionId), {}, { speculative: true, admissionDecidedBy: new Date(Date.now() + 30_000) });
      await new Promise((resolve) => setTimeout(resolve, 150));
      expect(await completionEvents(db.pool, completionId)).toHaveLength(0);
      expect((await placeHold(db.pool, { holdId: completionId, accountId, amountMicroChf: 50, now: new Date(), speculative: true })).ok).toBe(true);
      expect(await recording).toBe("recorded");
      expect(await completionEvents(db.pool, completionId)).toHaveLength(1);
    });

    it("records nothing when the admission was refused", async () => {
      const recorder = new UsageRecorder(db.pool);
      const accountId = await createBudgetedAccount(db.pool, 10);
      const completionId = randomUUID();
      const recording = recorder.record(usageOf(accountId, completionId), {}, { speculative: true, admissionDecidedBy: new Date(Date.now() + 30_000) });
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect((await placeHold(db.pool, { holdId: completionId, accountId, amountMicroChf: 50, now: new Date(), speculative: true })).ok).toBe(false);
      expect(await recording).toBe("refused");
      expect(await completionEvents(db.pool, completionId)).toHaveLength(0);
    });

    it("completes the admission itself once it should long have been decided and no hold is there (its API process died): charged when the budget has room", async () => {
      const recorder = new UsageRecorder(db.pool);
      const accountId = await createBudgetedAccount(db.pool, 1000);
      const completionId = randomUUID();
      expect(await recorder.record(usageOf(accountId, completionId), {}, { speculative: true, admissionDecidedBy: new Date(Date.now() - 1) })).toBe("recorded");
      expect(await completionEvents(db.pool, completionId)).toHaveLength(1);
      expect(await budgetRow(db.pool, accountId, period())).toEqual({ budget: 1000, spent: 9, held: 0 });
    });

    it("never takes an account past its budget for a job whose admission never came: refused, nothing charged, the refusal recorded", async () => {
      const recorder = new UsageRecorder(db.pool);
      // 5 µCHF left: the job's 9 do not fit (a probe overspent a budget so after killing the API mid-admission).
      const accountId = await createBudgetedAccount(db.pool, 5);
      const completionId = randomUUID();
      expect(await recorder.record(usageOf(accountId, completionId), {}, { speculative: true, admissionDecidedBy: new Date(Date.now() - 1) })).toBe("refused");
      expect(await completionEvents(db.pool, completionId)).toHaveLength(0);
      const spent = await budgetRow(db.pool, accountId, period());
      expect(spent === null || spent.spent === 0).toBe(true);
      const refusals = await db.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM refused_holds WHERE hold_id = $1", [completionId]);
      expect(refusals.rows[0]!.n).toBe(1);
    });
  });
});
