import { Queue } from "bullmq";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { CompletionQueues } from "../../src/api/inference/completionQueues.ts";
import type { CompletionJob } from "../../src/contracts/completionJob.ts";
import { createRedis, type Redis } from "../../src/redis/createRedis.ts";
import { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import { silentLogger } from "../../src/observability/logger.ts";
import { CompletionWorker } from "../../workers/completion/completionWorker.ts";
import { eventually } from "../support/eventually.ts";
import { createTestRedis, TEST_REDIS_URL, type TestRedis } from "../support/testRedis.ts";

const MODEL = "worker-test-model";

/** A runner whose jobs run until the test lets them finish. */
class HeldRunner {
  readonly started: string[] = [];
  readonly #release = new Map<string, () => void>();

  run(job: CompletionJob): Promise<void> {
    this.started.push(job.completionId);
    return new Promise((resolve) => this.#release.set(job.completionId, resolve));
  }

  finish(completionId: string): void {
    this.#release.get(completionId)?.();
  }

  finishAll(): void {
    for (const release of this.#release.values()) release();
  }
}

function job(completionId: string, keys: InferenceKeys): CompletionJob {
  return {
    completionId,
    endpoint: "embeddings",
    model: MODEL,
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
  let queue: Queue<CompletionJob> | undefined;
  /** BullMQ's own view of the model's queue. */
  const bullQueue = () => (queue ??= new Queue<CompletionJob>(keys.queueName(MODEL), { connection: redis.redis, prefix: keys.prefix }));
  beforeAll(async () => {
    redis = await createTestRedis();
    keys = new InferenceKeys(redis.prefix);
    queues = new CompletionQueues(redis.redis, keys);
    workerRedis = createRedis(TEST_REDIS_URL);
  });
  afterEach(async () => {
    runner?.finishAll();
    await worker?.close();
    worker = undefined;
  });
  afterAll(async () => {
    await queue?.close();
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

  it("waits for jobs on one blocking connection, whatever its concurrency, takes an arriving job at once and waits again", async () => {
    // One BullMQ worker per slot would hold a blocked connection each, and taking a job (which re-adds
    // the queue's marker) would wake another of them for a fetch that finds nothing.
    await start(4);
    await eventually(async () => ((await blockedClients()) === 1 ? true : undefined));
    await queues.enqueue(job("idle-1", keys));
    await eventually(async () => (runner.started.includes("idle-1") ? true : undefined));
    await eventually(async () => ((await blockedClients()) === 1 ? true : undefined));
    await queues.enqueue(job("idle-2", keys));
    await eventually(async () => (runner.started.includes("idle-2") ? true : undefined));
    expect(runner.started).toEqual(["idle-1", "idle-2"]);
  });

  /** The query buffer of our blocked connection: what Redis holds back until the BZPOPMIN returns. */
  const blockedQueryBuffer = async () => {
    const clients = ((await redis.redis.client("LIST")) as string).split("\n");
    const blocked = clients.filter((line) => line.includes(` name=${redis.prefix}:`) && / flags=b /.test(line) && / cmd=bzpopmin /.test(line));
    return blocked.length === 1 ? Number(/ qbuf=(\d+) /.exec(blocked[0]!)![1]) : undefined;
  };

  it("sends the job fetch along with its wait for a job, so an arriving job comes back in the same round trip", async () => {
    // BullMQ's own blocking fetch sends moveToActive only after BZPOPMIN answered: a round trip more
    // between a job's arrival and its start. Here the moveToActive waits in Redis behind the BZPOPMIN.
    await start(2);
    const waiting = await eventually(async () => await blockedQueryBuffer());
    expect(waiting).toBeGreaterThan(0);
    await queues.enqueue(job("one-trip-1", keys));
    await eventually(async () => (runner.started.includes("one-trip-1") ? true : undefined));
    const fetched = await bullQueue().getJob("one-trip-1");
    expect(fetched?.data.completionId).toBe("one-trip-1");
    expect(fetched?.attemptsStarted).toBe(1);
    expect(await bullQueue().getJobState("one-trip-1")).toBe("active");
    // Locked with a token of this worker's (the lock extension and moveToCompleted check it).
    expect(await redis.redis.get(`${keys.prefix}:${keys.queueName(MODEL)}:one-trip-1:lock`)).toMatch(/^.+:\d+$/);
    runner.finish("one-trip-1");
    await eventually(async () => ((await bullQueue().getJobState("one-trip-1")) === "unknown" ? true : undefined));
    expect(await eventually(async () => await blockedQueryBuffer())).toBeGreaterThan(0);
  });

  it("takes a delayed job when it is due, without spinning on the queue's marker meanwhile", async () => {
    await start(1);
    await eventually(async () => await blockedQueryBuffer());
    const monitor = await redis.redis.monitor();
    let markerWaits = 0;
    monitor.on("monitor", (_time: string, args: string[]) => {
      if (args[0]?.toLowerCase() === "bzpopmin" && args[1]?.startsWith(`${keys.prefix}:`)) markerWaits += 1;
    });
    const added = Date.now();
    await bullQueue().add("RunCompletion", job("delayed-1", keys), { jobId: "delayed-1", delay: 600 });
    await eventually(async () => (runner.started.includes("delayed-1") ? true : undefined));
    const startedAfter = Date.now() - added;
    monitor.disconnect();
    expect(startedAfter).toBeGreaterThanOrEqual(590);
    expect(startedAfter).toBeLessThan(2_000);
    expect(markerWaits).toBeLessThanOrEqual(4);
  });

  it("takes the next job after its blocked connection was killed while it waited (the fetch recovers)", async () => {
    await start(1);
    await eventually(async () => await blockedQueryBuffer());
    const clients = ((await redis.redis.client("LIST")) as string).split("\n");
    const blocked = clients.find((line) => line.includes(` name=${redis.prefix}:`) && / cmd=bzpopmin /.test(line))!;
    await redis.redis.client("KILL", "ID", /^id=(\d+) /.exec(blocked)![1]!);
    await queues.enqueue(job("after-kill-1", keys));
    await eventually(async () => (runner.started.includes("after-kill-1") ? true : undefined), 15_000);
    runner.finish("after-kill-1");
    await eventually(async () => ((await bullQueue().getJobState("after-kill-1")) === "unknown" ? true : undefined));
    // Waiting again, on one connection, with its job fetch behind the wait.
    expect(await eventually(async () => await blockedQueryBuffer())).toBeGreaterThan(0);
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
      async run(job: CompletionJob): Promise<void> {
        running += 1;
        most = Math.max(most, running);
        await new Promise((resolve) => setTimeout(resolve, 5 + (done.length % 7)));
        running -= 1;
        done.push(job.completionId);
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

  it("keeps the lock of a job that runs longer than the lock duration, so the job completes", async () => {
    runner = new HeldRunner();
    worker = new CompletionWorker({ modelId: MODEL, redis: workerRedis, keys, concurrency: 2, runner, logger: silentLogger, lockDurationMs: 600 });
    await worker.start();
    await queues.enqueue(job("long-1", keys));
    await eventually(async () => (runner.started.includes("long-1") ? true : undefined));
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(await bullQueue().getJobState("long-1")).toBe("active");
    runner.finish("long-1");
    // Completed jobs are removed (removeOnComplete): an expired lock would have left it active
    // (moveToCompleted refused: "Missing lock"), so the job is gone only if its lock was kept.
    await eventually(async () => ((await bullQueue().getJobState("long-1")) === "unknown" ? true : undefined));
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
    expect(await bullQueue().getJobState("after-close")).toBe("waiting");
    expect(await blockedClients()).toBe(0);
  });
});
