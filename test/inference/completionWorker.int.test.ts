import { Queue, Worker } from "bullmq";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { CompletionQueues } from "../../src/api/inference/jobs/completionQueues.ts";
import type { CompletionJob } from "../../src/contracts/completionJob.ts";
import { createRedis, type Redis } from "../../src/redis/createRedis.ts";
import { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import { silentLogger } from "../../src/observability/logger.ts";
import { CompletionWorker, fetchLoopsFor } from "../../workers/completion/completionWorker.ts";
import type { RunMode } from "../../workers/completion/resumption.ts";
import { eventually } from "../support/eventually.ts";
import { createTestRedis, TEST_REDIS_URL, type TestRedis } from "../support/testRedis.ts";

const MODEL = "worker-test-model";

/** A runner whose jobs run until the test lets them finish. */
class HeldRunner {
  readonly started: string[] = [];
  /** Every run with how the job reached the worker. */
  readonly runs: [string, RunMode][] = [];
  readonly #release = new Map<string, () => void>();

  run(job: CompletionJob, _signal?: AbortSignal, mode: RunMode = "new"): Promise<null> {
    this.started.push(job.completionId);
    this.runs.push([job.completionId, mode]);
    return new Promise((resolve) => this.#release.set(job.completionId, () => resolve(null)));
  }

  finish(completionId: string): void {
    this.#release.get(completionId)?.();
  }

  finishAll(): void {
    for (const release of this.#release.values()) release();
  }
}

/**
 * The tests that need BullMQ's stalled check use a queue of their own: a check on a queue skips the
 * checks of any worker of that queue for its worker's interval after it (30 s for the other tests).
 */
const LOCK_MODEL = "worker-test-model-lock";
const STALLED_MODEL = "worker-test-model-stalled";
const TWICE_MODEL = "worker-test-model-stalled-twice";

function job(completionId: string, keys: InferenceKeys, model = MODEL): CompletionJob {
  return {
    completionId,
    endpoint: "embeddings",
    model,
    accountId: "acc-1",
    keyId: "key-1",
    created: 1_700_000_000,
    replyTo: keys.replyChannel("test-listener"),
    work: { kind: "embeddings", input: ["x"] },
  };
}

describe("CompletionWorker (real Redis and BullMQ)", () => {
  let redis: TestRedis;
  let keys: InferenceKeys;
  let queues: CompletionQueues;
  let workerRedis: Redis;
  let worker: CompletionWorker | undefined;
  let runner: HeldRunner;
  const bullQueues = new Map<string, Queue<CompletionJob>>();
  /** BullMQ's own view of a model's queue. */
  const bullQueue = (model = MODEL) => {
    let queue = bullQueues.get(model);
    if (!queue) {
      queue = new Queue<CompletionJob>(keys.queueName(model), { connection: redis.redis, prefix: keys.prefix });
      bullQueues.set(model, queue);
    }
    return queue;
  };
  beforeAll(async () => {
    redis = await createTestRedis();
    keys = new InferenceKeys(redis.prefix);
    queues = new CompletionQueues(redis.redis, keys);
    workerRedis = createRedis(TEST_REDIS_URL, { kind: "worker" });
  });
  afterEach(async () => {
    runner?.finishAll();
    await worker?.close();
    worker = undefined;
  });
  afterAll(async () => {
    await Promise.all([...bullQueues.values()].map((q) => q.close()));
    await queues?.close();
    workerRedis?.disconnect();
    await redis?.close();
  });

  const start = async (concurrency: number) => {
    runner = new HeldRunner();
    worker = new CompletionWorker({ modelId: MODEL, redis: workerRedis, keys, concurrency, runner, logger: silentLogger });
    await worker.start();
  };

  it("runs as many jobs at once as its concurrency, and the next one when a slot frees up", async () => {
    await start(3);
    for (const id of ["w-1", "w-2", "w-3", "w-4"]) await queues.enqueue(job(id, keys));
    await eventually(async () => (runner.started.length === 3 ? true : undefined));
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(runner.started).toHaveLength(3);
    runner.finish(runner.started[0]!);
    await eventually(async () => (runner.started.length === 4 ? true : undefined));
    expect(new Set(runner.started)).toEqual(new Set(["w-1", "w-2", "w-3", "w-4"]));
  });

  const blockedClients = async () => {
    const clients = (await redis.redis.client("LIST")) as string;
    // BullMQ names its blocking connections after the queue's prefix: other test files' workers do not count.
    const ours = clients.split("\n").filter((line) => line.includes(` name=${redis.prefix}:`));
    return ours.filter((line) => / flags=b /.test(line) && / cmd=bzpopmin /.test(line)).length;
  };

  it("waits for jobs on one blocking connection per fetch loop (one per 8 slots, at most 4), not one per slot", () => {
    expect([1, 4, 8, 9, 16, 17, 24, 32, 33, 256].map(fetchLoopsFor)).toEqual([1, 1, 1, 2, 2, 3, 3, 4, 4, 4]);
  });

  it("with 4 fetch loops (32 slots): waits on 4 blocking connections, takes jobs in parallel, runs all 32 slots and never more", async () => {
    let running = 0;
    let most = 0;
    const done: string[] = [];
    const release: (() => void)[] = [];
    const heldRunner = {
      async run(job: CompletionJob): Promise<null> {
        running += 1;
        most = Math.max(most, running);
        await new Promise<void>((resolve) => release.push(resolve));
        running -= 1;
        done.push(job.completionId);
        return null;
      },
    };
    worker = new CompletionWorker({ modelId: MODEL, redis: workerRedis, keys, concurrency: 32, runner: heldRunner, logger: silentLogger });
    await worker.start();
    await eventually(async () => ((await blockedClients()) === 4 ? true : undefined));
    const ids = Array.from({ length: 40 }, (_, i) => `loops-${i}`);
    await Promise.all(ids.map((id) => queues.enqueue(job(id, keys))));
    // Every slot fills (the loops' concurrencies add up to the model's), and no more than that.
    await eventually(async () => (running === 32 ? true : undefined));
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(running).toBe(32);
    for (let round = 0; done.length < ids.length && round < 20; round++) {
      for (const resolve of release.splice(0)) resolve();
      await eventually(async () => (release.length > 0 || done.length === ids.length ? true : undefined));
    }
    expect(new Set(done)).toEqual(new Set(ids));
    expect(most).toBe(32);
    expect(await bullQueue().getJobCounts("wait", "failed")).toEqual({ wait: 0, failed: 0 });
  });

  it("waits for jobs on one blocking connection up to 8 slots, takes an arriving job at once and waits again", async () => {
    // One BullMQ worker per slot would hold a blocked connection each.
    await start(4);
    await eventually(async () => ((await blockedClients()) === 1 ? true : undefined));
    await queues.enqueue(job("idle-1", keys));
    await eventually(async () => (runner.started.includes("idle-1") ? true : undefined));
    await eventually(async () => ((await blockedClients()) === 1 ? true : undefined));
    await queues.enqueue(job("idle-2", keys));
    await eventually(async () => (runner.started.includes("idle-2") ? true : undefined));
    expect(runner.started).toEqual(["idle-1", "idle-2"]);
  });

  it("takes a delayed job when it is due", async () => {
    await start(1);
    await eventually(async () => ((await blockedClients()) === 1 ? true : undefined));
    const added = Date.now();
    await bullQueue().add("RunCompletion", job("delayed-1", keys), { jobId: "delayed-1", delay: 600 });
    await eventually(async () => (runner.started.includes("delayed-1") ? true : undefined));
    const startedAfter = Date.now() - added;
    expect(startedAfter).toBeGreaterThanOrEqual(590);
    expect(startedAfter).toBeLessThan(2_000);
  });

  it("takes the next job after its blocked connection was killed while it waited (the fetch recovers)", async () => {
    await start(1);
    await eventually(async () => ((await blockedClients()) === 1 ? true : undefined));
    const clients = ((await redis.redis.client("LIST")) as string).split("\n");
    const blocked = clients.find((line) => line.includes(` name=${redis.prefix}:`) && / cmd=bzpopmin /.test(line))!;
    await redis.redis.client("KILL", "ID", /^id=(\d+) /.exec(blocked)![1]!);
    await queues.enqueue(job("after-kill-1", keys));
    await eventually(async () => (runner.started.includes("after-kill-1") ? true : undefined), 15_000);
    runner.finish("after-kill-1");
    await eventually(async () => ((await bullQueue().getJobState("after-kill-1")) === "unknown" ? true : undefined));
    // Waiting again, on one connection.
    await eventually(async () => ((await blockedClients()) === 1 ? true : undefined));
  });

  it("takes a burst larger than its concurrency: as many at once as it may run, the rest as slots free up", async () => {
    await start(8);
    const ids = Array.from({ length: 20 }, (_, i) => `burst-${i}`);
    await Promise.all(ids.map((id) => queues.enqueue(job(id, keys))));
    await eventually(async () => (runner.started.length === 8 ? true : undefined));
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(runner.started).toHaveLength(8);
    for (let round = 0; runner.started.length < ids.length && round < 10; round++) {
      const running = runner.started.length;
      runner.finishAll();
      await eventually(async () => (runner.started.length > running ? true : undefined));
    }
    runner.finishAll();
    expect(new Set(runner.started)).toEqual(new Set(ids));
    await eventually(async () => ((await bullQueue().getJobCounts("active", "wait", "completed", "failed")).active === 0 ? true : undefined));
    expect(await bullQueue().getJobCounts("wait", "failed")).toEqual({ wait: 0, failed: 0 });
  });

  it("never runs more jobs at once than its concurrency while many fetches are on their way (a long burst of short jobs)", async () => {
    let running = 0;
    let most = 0;
    const done: string[] = [];
    const shortRunner = {
      async run(job: CompletionJob): Promise<null> {
        running += 1;
        most = Math.max(most, running);
        await new Promise((resolve) => setTimeout(resolve, 5 + (done.length % 7)));
        running -= 1;
        done.push(job.completionId);
        return null;
      },
    };
    worker = new CompletionWorker({ modelId: MODEL, redis: workerRedis, keys, concurrency: 6, runner: shortRunner, logger: silentLogger });
    await worker.start();
    const ids = Array.from({ length: 300 }, (_, i) => `short-${i}`);
    await Promise.all(ids.map((id) => queues.enqueue(job(id, keys))));
    await eventually(async () => (done.length === ids.length ? true : undefined), 30_000);
    expect(new Set(done)).toEqual(new Set(ids));
    expect(most).toBe(6);
  });

  /** A worker of 2 slots on `modelId` with a 600 ms lock and a stalled check every 200 ms (BullMQ's defaults are 30 s). */
  const startShortLockWorker = async (modelId: string) => {
    worker = new CompletionWorker({
      modelId,
      redis: workerRedis,
      keys,
      concurrency: 2,
      runner,
      logger: silentLogger,
      lockDurationMs: 600,
      stalledIntervalMs: 200,
    });
    await worker.start();
  };

  it("keeps the lock of a job that runs longer than the lock duration, so the job completes", async () => {
    runner = new HeldRunner();
    // The stalled check runs every 200 ms: a lock that ran out would get the job failed within it.
    await startShortLockWorker(LOCK_MODEL);
    await queues.enqueue(job("long-1", keys, LOCK_MODEL));
    await eventually(async () => (runner.started.includes("long-1") ? true : undefined));
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(await bullQueue(LOCK_MODEL).getJobState("long-1")).toBe("active");
    runner.finish("long-1");
    // Completed jobs are removed (removeOnComplete): an expired lock would have left it active
    // (moveToCompleted refused: "Missing lock") or failed, so the job is gone only if its lock was kept.
    await eventually(async () => ((await bullQueue(LOCK_MODEL).getJobState("long-1")) === "unknown" ? true : undefined));
    expect(runner.started).toEqual(["long-1"]);
  });

  it("runs once more, as redelivered, a job whose worker died while running it (BullMQ's stalled check)", async () => {
    // The dead worker: it took the job (BullMQ's manual fetch, a 300 ms lock) and was gone without
    // renewing the lock or finishing the job.
    const dead = new Worker<CompletionJob>(keys.queueName(STALLED_MODEL), null, {
      connection: workerRedis,
      prefix: keys.prefix,
      autorun: false,
      lockDuration: 300,
    });
    dead.on("error", () => undefined);
    await queues.enqueue(job("crashed-1", keys, STALLED_MODEL));
    const taken = await dead.getNextJob("dead-worker-token");
    expect(taken?.id).toBe("crashed-1");
    await dead.close();
    expect(await bullQueue(STALLED_MODEL).getJobState("crashed-1")).toBe("active");
    runner = new HeldRunner();
    await startShortLockWorker(STALLED_MODEL);
    // Noticed within a lock and two checks, and handed to the runner as a job run again.
    await eventually(async () => (runner.started.includes("crashed-1") ? true : undefined), 10_000);
    expect(runner.runs).toEqual([["crashed-1", "redelivered"]]);
    runner.finish("crashed-1");
    await eventually(async () => ((await bullQueue(STALLED_MODEL).getJobState("crashed-1")) === "unknown" ? true : undefined));
    // The worker goes on with the next job, a new one.
    await queues.enqueue(job("after-crash-1", keys, STALLED_MODEL));
    await eventually(async () => (runner.started.includes("after-crash-1") ? true : undefined));
    expect(runner.runs).toEqual([
      ["crashed-1", "redelivered"],
      ["after-crash-1", "new"],
    ]);
  });

  it("fails a job whose workers died twice, and has the runner end its stream (abandoned) instead of running it", async () => {
    // Two workers in turn take the job and die; this one also runs BullMQ's stalled check meanwhile.
    const dead = new Worker<CompletionJob>(keys.queueName(TWICE_MODEL), null, {
      connection: workerRedis,
      prefix: keys.prefix,
      autorun: false,
      lockDuration: 300,
      stalledInterval: 150,
      maxStalledCount: 1,
    });
    dead.on("error", () => undefined);
    const state = () => bullQueue(TWICE_MODEL).getJobState("twice-1");
    await queues.enqueue(job("twice-1", keys, TWICE_MODEL));
    expect((await dead.getNextJob("dead-worker-1"))?.id).toBe("twice-1");
    await dead.startStalledCheckTimer();
    await eventually(async () => ((await state()) === "waiting" ? true : undefined), 10_000);
    const again = await dead.getNextJob("dead-worker-2");
    expect(again?.stalledCounter).toBe(1);
    await eventually(async () => ((await state()) === "waiting" ? true : undefined), 10_000);
    await dead.close();
    runner = new HeldRunner();
    await startShortLockWorker(TWICE_MODEL);
    await eventually(async () => ((await state()) === "failed" ? true : undefined), 10_000);
    expect((await bullQueue(TWICE_MODEL).getJob("twice-1"))?.failedReason).toMatch(/stalled more than allowable limit/);
    await eventually(async () => (runner.runs.length > 0 ? true : undefined));
    expect(runner.runs).toEqual([["twice-1", "abandoned"]]);
  });

  it("fails a job whose data does not parse, and goes on with the next", async () => {
    await start(1);
    await bullQueue().add("RunCompletion", { completionId: "bad-1" } as unknown as CompletionJob, { jobId: "bad-1", removeOnFail: false });
    await eventually(async () => ((await bullQueue().getJobState("bad-1")) === "failed" ? true : undefined));
    await queues.enqueue(job("good-1", keys));
    await eventually(async () => (runner.started.includes("good-1") ? true : undefined));
    expect(runner.started).toEqual(["good-1"]);
  });

  it("close() stops taking jobs and waits for the running ones", async () => {
    await start(2);
    await queues.enqueue(job("closing-1", keys));
    await eventually(async () => (runner.started.includes("closing-1") ? true : undefined));
    let closed = false;
    const closing = worker!.close().then(() => (closed = true));
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(closed).toBe(false);
    await queues.enqueue(job("after-close", keys));
    runner.finish("closing-1");
    await closing;
    worker = undefined;
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(runner.started).toEqual(["closing-1"]);
    expect(await bullQueue().getJobState("closing-1")).toBe("unknown");
    expect(await bullQueue().getJobState("after-close")).toBe("prioritized"); // every job has a priority (lane and fair-share rank)
    expect(await blockedClients()).toBe(0);
  });
});
