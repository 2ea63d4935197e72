import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger, silentLogger } from "../../src/observability/logger.ts";
import { createPool } from "../../src/db/createPool.ts";
import { UsageRecorder } from "../../workers/completion/usageRecorder.ts";
import type { UsageRecorded } from "../../src/ledger/usageRecordedEvent.ts";
import { allProjections } from "../../projections/allProjections.ts";
import { readCheckpoint } from "../../projections/checkpoint.ts";
import { readAll } from "../../src/ledger/eventStore/readAll.ts";
import { ProjectionRunner } from "../../projections/projectionRunner.ts";
import { replayReadModels } from "../../projections/replayReadModels.ts";
import { createTestDatabase, type TestDatabase } from "../support/testDatabase.ts";
import { createBudgetedAccount, usageEvent } from "../usage/usageFixtures.ts";
import { eventually, eventuallyTrue } from "../support/eventually.ts";
import { expectedUsage, liveUsage } from "./usageExpectations.ts";

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});

const runner = () => new ProjectionRunner({ pool: db.pool, logger: silentLogger, projections: allProjections, batchSize: 7, pollIntervalMs: 20 });

/** A runner that notes every poll (step) of each projection: when, and how many events it applied. */
function countingRunner(options: { batchSize: number; pollIntervalMs: number }) {
  const polls: { projection: string; at: number; applied: number }[] = [];
  class CountingRunner extends ProjectionRunner {
    override async step(...args: Parameters<ProjectionRunner["step"]>): Promise<number> {
      const applied = await super.step(...args);
      polls.push({ projection: args[1].name, at: performance.now(), applied });
      return applied;
    }
  }
  return { runner: new CountingRunner({ pool: db.pool, logger: silentLogger, projections: allProjections, ...options }), polls };
}

describe("projection runner", () => {
  it("warns of a database it cannot reach once per 10 s per projection, not at every retry (once a second)", async () => {
    const lines: string[] = [];
    const logger = createLogger("warn", {}, (line) => lines.push(line));
    // Nothing listens on port 1 of the loopback: every connection is refused at once.
    const unreachable = createPool("postgres://postgres@127.0.0.1:1/none", 2, { keepOpen: 0 });
    unreachable.on("error", () => undefined);
    const r = new ProjectionRunner({ pool: unreachable, logger, projections: allProjections.slice(0, 1), batchSize: 10, pollIntervalMs: 20 });
    r.start();
    try {
      await new Promise((resolve) => setTimeout(resolve, 3_500));
    } finally {
      await r.stop();
      await unreachable.end();
    }
    const warnings = lines.filter((line) => line.includes("database unavailable"));
    // About four retries in 3.5 s: one line (it was a line per retry).
    expect(warnings).toHaveLength(1);
    expect(JSON.parse(warnings[0]!)).toMatchObject({ level: "warn", projection: allProjections[0]!.name });
  });

  it("projects UsageRecorded into the key and account read models, with the figures a hand computation gives", async () => {
    const accountId = await createBudgetedAccount(db.pool, 1_000_000);
    const keyA = randomUUID();
    const keyB = randomUUID();
    // Two keys, two models, two days (one event just before midnight UTC, one just after); one usage of a batch line.
    const events: UsageRecorded["data"][] = [
      usageEvent({
        accountId,
        keyId: keyA,
        model: "m1",
        promptTokens: 12,
        completionTokens: 30,
        reasoningTokens: 5,
        costMicroChf: 41,
        finishedAt: "2025-05-01T10:00:00.000Z",
      }).data,
      usageEvent({
        accountId,
        keyId: keyA,
        model: "m1",
        promptTokens: 8,
        completionTokens: 2,
        reasoningTokens: 0,
        costMicroChf: 7,
        finishedAt: "2025-05-01T23:59:59.999Z",
        // A Batch API line's usage: counted in the totals and in the batch figures.
        batchDiscountBps: 5000,
      }).data,
      usageEvent({
        accountId,
        keyId: keyA,
        model: "m2",
        promptTokens: 100,
        completionTokens: 0,
        reasoningTokens: 0,
        costMicroChf: 10,
        finishedAt: "2025-05-02T00:00:00.000Z",
        endpoint: "embeddings",
      }).data,
      usageEvent({
        accountId,
        keyId: keyB,
        model: "m1",
        promptTokens: 3,
        completionTokens: 4,
        reasoningTokens: 1,
        costMicroChf: 1,
        finishedAt: "2025-05-01T12:00:00.000Z",
        outcome: "cancelled",
      }).data,
    ];
    const r = runner();
    r.start();
    try {
      const recorder = new UsageRecorder(db.pool);
      for (const data of events) expect(await recorder.record(data, {})).toBe("recorded");
      const expected = expectedUsage(events);
      // Hand computation of the key read model, written out.
      expect(expected.keyDays.find((k) => k.key_id === keyA && k.day === "2025-05-01")).toMatchObject({
        requests: 2,
        prompt_tokens: 20,
        completion_tokens: 32,
        reasoning_tokens: 5,
        cost_micro_chf: 48,
        batch_requests: 1,
        batch_cost_micro_chf: 7,
        last_used_at: "2025-05-01T23:59:59.999Z",
      });
      const appended = Date.now();
      expect(await eventuallyTrue(async () => JSON.stringify(await liveUsage(db.pool, [accountId])) === JSON.stringify(expected))).toBe(true);
      // No timing assertion; the latency is only reported.
      process.stdout.write(`usage visible in read models ${Date.now() - appended} ms after the last append\n`);
      expect(await liveUsage(db.pool, [accountId])).toEqual(expected);
      // (keyA, 05-01, m1) x2, (keyA, 05-02, m2), (keyB, 05-01, m1)
      expect(expected.accountDays).toHaveLength(3);
      expect(expected.accountDays.find((a) => a.key_id === keyA && a.model === "m1")).toMatchObject({
        requests: 2,
        cost_micro_chf: 48,
        batch_requests: 1,
        batch_cost_micro_chf: 7,
      });
    } finally {
      await r.stop();
    }
  });

  it("runs one active instance per projection; a stand-by takes over when it stops, and nothing is applied twice", async () => {
    const accountId = await createBudgetedAccount(db.pool, 1_000_000);
    const first = runner();
    const second = runner();
    first.start();
    second.start();
    const recorder = new UsageRecorder(db.pool);
    const events: UsageRecorded["data"][] = [];
    try {
      for (let i = 0; i < 40; i++) {
        const e = usageEvent({
          accountId,
          keyId: i % 2 ? "k-odd" : "k-even",
          model: `m${i % 3}`,
          promptTokens: i,
          completionTokens: 2 * i,
          costMicroChf: i + 1,
        }).data;
        events.push(e);
        expect(await recorder.record(e, {})).toBe("recorded");
        if (i === 20) await first.stop(); // whichever was active, the other one goes on (or already was)
      }
      const expected = expectedUsage(events);
      expect(await eventuallyTrue(async () => JSON.stringify(await liveUsage(db.pool, [accountId])) === JSON.stringify(expected))).toBe(true);
      // Only one holder of each projection lock at a time.
      const locks = await db.pool.query(
        `SELECT count(*)::int AS n FROM pg_locks
          WHERE locktype = 'advisory' AND classid = 727100 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
      );
      expect(locks.rows[0].n).toBeLessThanOrEqual(allProjections.length);
    } finally {
      await first.stop();
      await second.stop();
    }
    for (const p of allProjections) expect((await readCheckpoint(db.pool, p.name)).globalPosition).not.toBe("0");
  });

  it("polls an idle log less and less often (up to 10 x its interval), and at its interval again once events come", async () => {
    // The log is idle once the earlier tests' events are projected.
    const { runner: r, polls } = countingRunner({ batchSize: 100, pollIntervalMs: 20 });
    r.start();
    try {
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      // Without the backoff: about 1500 / 20 = 75 polls per projection. With it (20, 40, 80, 160, 200,
      // 200, ... ms): about 12.
      const idlePolls = polls.length / allProjections.length;
      expect(idlePolls).toBeLessThan(25);
      expect(idlePolls).toBeGreaterThanOrEqual(5);
      // After the quiet spell an event is still projected (within the longest wait, 200 ms here).
      const accountId = await createBudgetedAccount(db.pool, 1_000_000);
      const event = usageEvent({ accountId, model: "m1", promptTokens: 1, completionTokens: 1, reasoningTokens: 0, costMicroChf: 1 }).data;
      expect(await new UsageRecorder(db.pool).record(event, {})).toBe("recorded");
      const expected = expectedUsage([event]);
      expect(await eventuallyTrue(async () => JSON.stringify(await liveUsage(db.pool, [accountId])) === JSON.stringify(expected))).toBe(true);
      await new Promise((resolve) => setTimeout(resolve, 300));
      // Each projection: the poll that applied the event, an empty one an interval later, then the wait
      // starts over at the interval (20 ms; 200 ms had the backoff gone on).
      for (const projection of allProjections) {
        const own = polls.filter((poll) => poll.projection === projection.name);
        const found = own.findLastIndex((poll) => poll.applied > 0);
        expect(found).toBeGreaterThanOrEqual(0);
        const [firstEmpty, next] = [own[found + 1], own[found + 2]];
        expect(firstEmpty?.applied).toBe(0);
        expect(next).toBeDefined();
        expect(next!.at - firstEmpty!.at).toBeLessThan(150);
      }
    } finally {
      await r.stop();
    }
  });

  it("goes on at once after a full batch, and waits its interval after a partial one (one transaction for what arrives meanwhile)", async () => {
    // 20 usages (and the account's own events) in the log before the runner starts: full batches, then a
    // partial one.
    const accountId = await createBudgetedAccount(db.pool, 1_000_000);
    const recorder = new UsageRecorder(db.pool);
    for (let i = 0; i < 20; i++) {
      const event = usageEvent({ accountId, model: "m1", promptTokens: 1, completionTokens: 1, reasoningTokens: 0, costMicroChf: 1 }).data;
      expect(await recorder.record(event, {})).toBe("recorded");
    }
    // A batch size that leaves a partial batch after at least two full ones, whatever else the log holds.
    // The log's reader is gap-safe: a transaction still open elsewhere on the server keeps newer events
    // back for a moment, so wait until the 20 are readable (the runner then reads the same).
    const pendingNow = () =>
      Promise.all(allProjections.map(async (projection) => (await readAll(db.pool, await readCheckpoint(db.pool, projection.name), 1_000)).length));
    const pending = await eventually(async () => {
      const counts = await pendingNow();
      return counts.every((count) => count >= 20) ? counts : undefined;
    }, 20_000);
    const batchSize = [7, 6, 5, 4, 3].find((size) => pending.every((count) => count >= 2 * size && count % size !== 0));
    expect(batchSize, `events pending: ${pending.join(", ")}`).toBeDefined();
    const intervalMs = 600;
    const { runner: r, polls } = countingRunner({ batchSize: batchSize!, pollIntervalMs: intervalMs });
    r.start();
    try {
      await new Promise((resolve) => setTimeout(resolve, 2 * intervalMs));
    } finally {
      await r.stop();
    }
    for (const projection of allProjections) {
      const own = polls.filter((poll) => poll.projection === projection.name);
      const partial = own.findIndex((poll) => poll.applied < batchSize!);
      expect(partial, projection.name).toBeGreaterThanOrEqual(2);
      expect(own[partial]!.applied).toBeGreaterThan(0);
      // After each full batch the next poll follows at once, after the partial one an interval later.
      for (let i = 1; i <= partial; i++) expect(own[i]!.at - own[i - 1]!.at).toBeLessThan(intervalMs / 2);
      expect(own[partial + 1], `${projection.name}: a poll after the partial batch`).toBeDefined();
      expect(own[partial + 1]!.at - own[partial]!.at).toBeGreaterThanOrEqual(intervalMs - 50);
    }
  });

  it("rebuilds every read model from the log equal to the live ones, and reports a tampered row", async () => {
    const report = await replayReadModels(db.pool, allProjections);
    expect(report.eventsRead).toBeGreaterThan(40);
    expect(report.models.map((m) => m.model)).toEqual(["rm_key_usage_daily", "rm_account_usage_daily", "rm_accounts", "rm_keys", "rm_budget.spent_micro_chf"]);
    expect(report.models.filter((m) => m.onlyLive.length || m.onlyRebuilt.length)).toEqual([]);
    expect(report.differences).toBe(0);
    expect(report.models.find((m) => m.model === "rm_key_usage_daily")!.liveRows).toBeGreaterThan(0);

    await db.pool.query("UPDATE rm_account_usage_daily SET cost_micro_chf = cost_micro_chf + 1 WHERE key_id = 'k-odd' AND model = 'm1'");
    const tampered = await replayReadModels(db.pool, allProjections);
    expect(tampered.differences).toBe(1);
    const diff = tampered.models.find((m) => m.model === "rm_account_usage_daily")!;
    expect(diff.onlyLive).toHaveLength(1);
    expect(diff.onlyRebuilt).toHaveLength(1);
    expect(Number(diff.onlyLive[0]!.cost_micro_chf) - Number(diff.onlyRebuilt[0]!.cost_micro_chf)).toBe(1);
    await db.pool.query("UPDATE rm_account_usage_daily SET cost_micro_chf = cost_micro_chf - 1 WHERE key_id = 'k-odd' AND model = 'm1'");
    // The scratch schema was rolled back.
    const schemas = await db.pool.query("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'replay_%'");
    expect(schemas.rowCount).toBe(0);
  });
});
