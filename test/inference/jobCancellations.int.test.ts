import { Worker } from "bullmq";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CompletionQueues } from "../../src/api/inference/jobs/completionQueues.ts";
import { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import { JobCancellations, JobCancelledError } from "../../workers/completion/jobCancellations.ts";
import { duplicateAs } from "../../src/redis/createRedis.ts";
import { createTestRedis, TEST_REDIS_URL, type TestRedis } from "../support/testRedis.ts";

describe("JobCancellations (real Redis pub/sub)", () => {
  let redis: TestRedis;
  let keys: InferenceKeys;
  let cancellations: JobCancellations;
  let queues: CompletionQueues;
  beforeAll(async () => {
    redis = await createTestRedis();
    keys = new InferenceKeys(redis.prefix);
    cancellations = new JobCancellations(TEST_REDIS_URL, keys);
    await cancellations.ready;
    queues = new CompletionQueues(redis.redis, keys);
  });
  afterAll(async () => {
    cancellations?.close();
    await queues?.close();
    await redis?.close();
  });

  const aborted = (signal: AbortSignal) =>
    new Promise<unknown>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("not aborted within 2 s")), 2_000);
      signal.addEventListener("abort", () => {
        clearTimeout(timer);
        resolve(signal.reason);
      });
    });

  it("aborts a job a worker is running when the API cancels it", async () => {
    const seen: { cancelled: boolean; reason: unknown }[] = [];
    const connection = duplicateAs(redis.redis, "worker");
    const worker = new Worker(
      keys.queueName("m1"),
      async (job) => {
        const tracked = cancellations.track(job.id!);
        try {
          const reason = await aborted(tracked.signal);
          seen.push({ cancelled: tracked.cancelled, reason });
        } finally {
          tracked.done();
        }
      },
      { connection, prefix: keys.prefix },
    );
    try {
      const queue = queues.queue("m1");
      await queue.add("RunCompletion", { completionId: "cmpl-running" } as never, { jobId: "cmpl-running" });
      for (let i = 0; i < 100 && (await queue.getJobState("cmpl-running")) !== "active"; i++) await new Promise((r) => setTimeout(r, 20));
      expect(await queue.getJobState("cmpl-running")).toBe("active");
      await queues.cancel("m1", "cmpl-running");
      for (let i = 0; i < 100 && seen.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
      expect(seen).toHaveLength(1);
      expect(seen[0]!.cancelled).toBe(true);
      expect(seen[0]!.reason).toBeInstanceOf(JobCancelledError);
      expect((seen[0]!.reason as JobCancelledError).reason).toBe("refused");
    } finally {
      await worker.close();
      connection.disconnect();
    }
  });

  it("aborts a job as it starts when its cancel came first", async () => {
    await redis.redis.publish(keys.cancelChannel(), JSON.stringify({ completionId: "cmpl-early", reason: "user" }));
    await new Promise((resolve) => setTimeout(resolve, 100));
    const early = cancellations.track("cmpl-early");
    expect(early.cancelled).toBe(true);
    expect(early.reason).toBe("user");
    expect(cancellations.track("cmpl-other").cancelled).toBe(false);
  });

  it("takes a job that no worker took yet off the queue, and tells the workers all the same (a queue that lost a running job with Redis has none)", async () => {
    const queue = queues.queue("m2");
    await queue.add("RunCompletion", { completionId: "cmpl-waiting" } as never, { jobId: "cmpl-waiting" });
    const job = cancellations.track("cmpl-waiting");
    const abort = aborted(job.signal);
    expect(await queues.cancel("m2", "cmpl-waiting", "lost", 2)).toBe(true);
    expect(await queue.getJob("cmpl-waiting")).toBeUndefined();
    expect(await abort).toMatchObject({ reason: "lost", deliveredThroughSeq: 2 });
    job.done();
  });
  it("leaves a job a worker took on the queue when its worker died (its lock run out): kept, with its cancel, for the worker that takes it over", async () => {
    const connection = duplicateAs(redis.redis, "worker");
    let started!: () => void;
    const took = new Promise<void>((resolve) => {
      started = resolve;
    });
    // A worker that takes the job and dies with it (closed by force: no completion, its lock left to run out).
    const dying = new Worker(
      keys.queueName("m-dead"),
      async () => {
        started();
        await new Promise(() => undefined);
      },
      { connection, prefix: keys.prefix, lockDuration: 500, stalledInterval: 60_000 },
    );
    const queue = queues.queue("m-dead");
    try {
      await queue.add("RunCompletion", {} as never, { jobId: "cmpl-orphaned" });
      await took;
      await dying.close(true);
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      // Abandoned by the API (its client waited the idle timeout): not removed, its cancel kept for the next worker.
      expect(await queues.cancel("m-dead", "cmpl-orphaned", "abandoned")).toBe(false);
      expect(await queue.getJobState("cmpl-orphaned")).toBe("active");
      expect(await redis.redis.get(keys.cancelMark("cmpl-orphaned"))).toContain("abandoned");
    } finally {
      await dying.close(true).catch(() => undefined);
      connection.disconnect();
    }
  });
});
