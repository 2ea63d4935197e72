import { randomUUID } from "node:crypto";
import { Queue, Worker } from "bullmq";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RUN_COMPLETION } from "../../src/contracts/completionJob.ts";
import { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import { HoldSweeper } from "../../src/ledger/budget/holdSweeper.ts";
import { placeHold } from "../../src/ledger/budget/placeHold.ts";
import { silentLogger } from "../../src/observability/logger.ts";
import { createRedis } from "../../src/redis/createRedis.ts";
import { QueuedOrRunningJobs } from "../../projections/queuedOrRunningJobs.ts";
import { eventually } from "../support/eventually.ts";
import { freePort } from "../support/freePort.ts";
import { createTestDatabase, type TestDatabase } from "../support/testDatabase.ts";
import { createTestRedis, TEST_REDIS_URL, type TestRedis } from "../support/testRedis.ts";
import { budgetRow, createBudgetedAccount } from "./usageFixtures.ts";

/**
 * The hold sweeper releases a hold older than BUDGET_HOLD_MAX_AGE_S only when its job is gone from
 * BullMQ: a job still queued (a background response waits in line without a start timeout) or running
 * keeps its hold, or its account could be admitted past its budget meanwhile (a probe overspent a budget
 * by 115% with four background responses queued behind other accounts' traffic). Real BullMQ queues and
 * a real worker; Redis away: old holds are kept.
 */
let db: TestDatabase;
let testRedis: TestRedis;
let keys: InferenceKeys;
const MODELS = ["model-a", "model-b"];

beforeAll(async () => {
  db = await createTestDatabase();
  testRedis = await createTestRedis();
  keys = new InferenceKeys(testRedis.prefix);
});
afterAll(async () => {
  await testRedis?.close();
  await db?.drop();
});

/** A sweeper an hour after `t0`, releasing holds older than 30 minutes whose jobs `jobs` no longer has. */
function sweeperAsking(jobs: QueuedOrRunningJobs, t0: Date): HoldSweeper {
  return new HoldSweeper({
    pool: db.pool,
    clock: { now: () => new Date(t0.getTime() + 3_600_000) },
    logger: silentLogger,
    maxHoldAgeMs: 1_800_000,
    intervalMs: 0,
    jobsStillThere: (ids) => jobs.among(ids),
  });
}

describe("the hold sweeper and jobs still queued or running", () => {
  it("keeps the old holds of queued and running jobs, releases those whose job ended or never was", async () => {
    const t0 = new Date("2025-07-10T12:00:00.000Z");
    const accountId = await createBudgetedAccount(db.pool, 10_000, t0);
    const [queued, running, finished, never] = [randomUUID(), randomUUID(), randomUUID(), randomUUID()];
    for (const holdId of [queued, running, finished, never]) {
      expect((await placeHold(db.pool, { holdId, accountId, amountMicroChf: 1000, now: t0 })).ok).toBe(true);
    }
    const queueA = new Queue(keys.queueName("model-a"), { connection: testRedis.redis, prefix: keys.prefix });
    const queueB = new Queue(keys.queueName("model-b"), { connection: testRedis.redis, prefix: keys.prefix });
    // A job running on model B's worker until released; one that ran and was removed; one waiting in line on A.
    let releaseRunning!: () => void;
    const runningHeld = new Promise<void>((resolve) => {
      releaseRunning = resolve;
    });
    const workerConnection = createRedis(TEST_REDIS_URL, { kind: "worker" });
    const worker = new Worker(keys.queueName("model-b"), async (job) => (job.id === running ? runningHeld : undefined), {
      connection: workerConnection,
      prefix: keys.prefix,
      concurrency: 2,
    });
    const jobs = new QueuedOrRunningJobs(testRedis.redis, keys, MODELS);
    try {
      await queueB.add(RUN_COMPLETION, {}, { jobId: finished, removeOnComplete: true, priority: 5 });
      await queueB.add(RUN_COMPLETION, {}, { jobId: running, removeOnComplete: true, priority: 5 });
      await eventually(async () => ((await queueB.getJobState(finished)) === "unknown" && (await queueB.getJobState(running)) === "active" ? true : undefined));
      await queueA.add(RUN_COMPLETION, {}, { jobId: queued, priority: 5 });

      const sweeper = sweeperAsking(jobs, t0);
      expect(await sweeper.sweepOnce()).toBe(2);
      const left = await db.pool.query<{ hold_id: string }>("SELECT hold_id FROM budget_holds WHERE account_id = $1 ORDER BY hold_id", [accountId]);
      expect(left.rows.map((r) => r.hold_id)).toEqual([queued, running].sort());
      expect(await budgetRow(db.pool, accountId, "2025-07-01")).toEqual({ budget: 10_000, spent: 0, held: 2000 });

      // Once the running job ended and the queued one was taken off the queue, their holds go too.
      releaseRunning();
      await (await queueA.getJob(queued))!.remove();
      await eventually(async () => ((await queueB.getJobState(running)) === "unknown" ? true : undefined));
      expect(await sweeper.sweepOnce()).toBe(2);
      expect(await budgetRow(db.pool, accountId, "2025-07-01")).toEqual({ budget: 10_000, spent: 0, held: 0 });
    } finally {
      await worker.close();
      workerConnection.disconnect();
      await jobs.close();
      await queueA.close();
      await queueB.close();
    }
  });

  it("keeps every old hold while Redis cannot be asked, and releases them once it can", async () => {
    const t0 = new Date("2025-08-10T12:00:00.000Z");
    const accountId = await createBudgetedAccount(db.pool, 10_000, t0);
    const holdId = randomUUID();
    expect((await placeHold(db.pool, { holdId, accountId, amountMicroChf: 700, now: t0 })).ok).toBe(true);
    // Nothing listens on this port: the connection never becomes ready.
    const away = createRedis(`redis://127.0.0.1:${await freePort()}`, { kind: "fail-fast" });
    const unreachable = new QueuedOrRunningJobs(away, keys, MODELS);
    const reachable = new QueuedOrRunningJobs(testRedis.redis, keys, MODELS);
    try {
      expect(await sweeperAsking(unreachable, t0).sweepOnce()).toBe(0);
      expect(await budgetRow(db.pool, accountId, "2025-08-01")).toEqual({ budget: 10_000, spent: 0, held: 700 });
      expect(await sweeperAsking(reachable, t0).sweepOnce()).toBe(1);
      expect(await budgetRow(db.pool, accountId, "2025-08-01")).toEqual({ budget: 10_000, spent: 0, held: 0 });
    } finally {
      await unreachable.close();
      away.disconnect();
      await reachable.close();
    }
  });
});
