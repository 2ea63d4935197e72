import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import type { CompletionJob } from "../../src/contracts/completionJob.ts";
import type { Lane } from "../../src/contracts/lanes.ts";
import { jobPriority } from "../../src/contracts/lanes.ts";
import type { TenantLimits } from "../../src/contracts/tenantCounters.ts";
import { silentLogger } from "../../src/observability/logger.ts";
import { CompletionWorker } from "../../workers/completion/completionWorker.ts";
import { eventually } from "../support/eventually.ts";
import { useTenantQueueRig } from "./tenantQueueRig.ts";

/**
 * Lanes and fair share on a real BullMQ queue and a real CompletionWorker (one slot): every
 * interactive job before any background job before any batch job; inside a lane an account's n-th job
 * in flight after every other account's earlier ones; a batch backlog delays an interactive job by at
 * most the one job running. The worker reports each job started and ended to the tenant counters, and
 * entries nobody reports expire on their own.
 */
const LIMITS: TenantLimits = {
  account: { requestsPerMinute: 1e9, tokensPerMinute: 1e12, concurrentRequests: 1e6 },
  key: { requestsPerMinute: 1e9, tokensPerMinute: 1e12, concurrentRequests: 1e6 },
  queueShare: 1e6,
};

/** Runs each job until the test lets it finish; records the order jobs started in. */
class HeldRunner {
  readonly started: string[] = [];
  readonly #release = new Map<string, () => void>();
  run(job: CompletionJob): Promise<null> {
    this.started.push(job.completionId);
    return new Promise((resolve) => this.#release.set(job.completionId, () => resolve(null)));
  }
  finish(id: string): void {
    this.#release.get(id)?.();
  }
}

const rig = useTenantQueueRig();

/** Admits a job of `account` in `lane` (its fair-share rank from the counters) and queues it. */
async function enqueue(model: string, id: string, account: string, lane: Lane): Promise<void> {
  const admitted = await rig.counters.admit({
    completionId: id,
    accountId: account,
    keyId: `${account}-key`,
    model,
    tokens: 10,
    countsAsRequest: true,
    limits: LIMITS,
    waitTtlMs: 60_000,
    runTtlMs: 60_000,
  });
  expect(admitted.refused).toBeNull();
  const job: CompletionJob = {
    completionId: id,
    endpoint: "embeddings",
    model,
    accountId: account,
    keyId: `${account}-key`,
    created: 1_700_000_000,
    replyTo: rig.keys.replyChannel("lanes-test"),
    lane,
    priority: jobPriority(lane, admitted.rank),
    work: { kind: "embeddings", input: ["x"] },
  };
  await rig.queues.enqueue(job);
}

function startWorker(model: string, runner: HeldRunner): CompletionWorker {
  return new CompletionWorker({
    modelId: model,
    redis: rig.workerRedis,
    keys: rig.keys,
    concurrency: 1,
    runner,
    logger: silentLogger,
    tenants: { counters: rig.counters, inFlightTtlMs: 60_000 },
  });
}

/** Lets the running job finish and waits for the next one to start. */
async function next(runner: HeldRunner): Promise<string> {
  const count = runner.started.length;
  runner.finish(runner.started.at(-1)!);
  return eventually(async () => (runner.started.length > count ? runner.started.at(-1) : undefined), 10_000);
}

describe("lanes and fair share on one model's queue", () => {
  it("serves interactive before background before batch, and inside a lane each account's earlier jobs first", async () => {
    const model = `lanes-${randomUUID().slice(0, 8)}`;
    for (const id of ["batch-1", "batch-2"]) await enqueue(model, id, "bulk", "batch");
    for (const id of ["bg-1", "bg-2"]) await enqueue(model, id, "bulk", "background");
    for (const id of ["a-1", "a-2", "a-3", "a-4"]) await enqueue(model, id, "heavy", "interactive");
    await enqueue(model, "b-1", "light", "interactive");
    const runner = new HeldRunner();
    const worker = startWorker(model, runner);
    await worker.start();
    try {
      await eventually(async () => (runner.started.length === 1 ? true : undefined), 10_000);
      const order = [runner.started[0]!];
      for (let i = 1; i < 9; i++) order.push(await next(runner));
      // B's first job goes right after A's first (same rank, queued later), before A's 2nd to 4th.
      expect(order).toEqual(["a-1", "b-1", "a-2", "a-3", "a-4", "bg-1", "bg-2", "batch-1", "batch-2"]);
      runner.finish("batch-2");
      // Every job ended: the worker took each out of its account's in-flight set (the next one ranks first).
      await eventually(async () => {
        const probe = await rig.counters.admit({
          completionId: `probe-${randomUUID()}`,
          accountId: "heavy",
          keyId: "heavy-key",
          model,
          tokens: 0,
          countsAsRequest: false,
          limits: LIMITS,
          waitTtlMs: 1,
          runTtlMs: 1,
        });
        return probe.rank === 0 ? true : undefined;
      }, 10_000);
    } finally {
      await worker.close();
    }
  });

  it("lets a batch backlog delay an interactive job by at most the job running", async () => {
    const model = `lanes-${randomUUID().slice(0, 8)}`;
    const runner = new HeldRunner();
    const worker = startWorker(model, runner);
    await worker.start();
    try {
      for (let i = 1; i <= 20; i++) await enqueue(model, `batch-${i}`, "bulk", "batch");
      await eventually(async () => (runner.started.length === 1 ? true : undefined), 10_000);
      await enqueue(model, "chat-1", "someone", "interactive");
      expect(await next(runner)).toBe("chat-1");
      expect(await next(runner)).toBe("batch-2");
      expect(await rig.queues.positionOf(model, jobPriority("interactive", 0))).toBe(0);
      expect(await rig.counters.laneWaiting(model, "batch")).toBe(0); // nobody reported the lane sets here (the API does)
    } finally {
      for (const id of runner.started) runner.finish(id);
      await worker.close();
    }
  });

  it("tells a job its exact place up to an account's 17th in line, and the whole waiting count beyond (an upper bound, not counted per priority)", async () => {
    const model = `lanes-${randomUUID().slice(0, 8)}`;
    for (let i = 0; i < 20; i++) await enqueue(model, `heavy-${i}`, "heavy", "interactive");
    await enqueue(model, "light-0", "light", "interactive");
    expect(await rig.queues.positionOf(model, jobPriority("interactive", 0))).toBe(2);
    expect(await rig.queues.positionOf(model, jobPriority("interactive", 3))).toBe(5);
    expect(await rig.queues.positionOf(model, jobPriority("interactive", 15))).toBe(17);
    expect(await rig.queues.positionOf(model, jobPriority("interactive", 16))).toBe(21);
    expect(await rig.queues.positionOf(model, jobPriority("interactive", 16), 7)).toBe(7);
  });

  it("counts a job admitted with its lane in the lane's waiting set until a worker takes it", async () => {
    const model = `lanes-${randomUUID().slice(0, 8)}`;
    const admission = { accountId: "laned", keyId: "laned-key", model, tokens: 0, countsAsRequest: true, limits: LIMITS, waitTtlMs: 60_000, runTtlMs: 60_000 };
    await rig.counters.admit({ ...admission, completionId: "laned-1" }, { lane: "background", ttlMs: 60_000 });
    await rig.counters.admit({ ...admission, completionId: "laned-2" }, { lane: "background", ttlMs: 60_000 });
    expect(await rig.counters.laneWaiting(model, "background")).toBe(2);
    expect(await rig.counters.laneWaiting(model, "interactive")).toBe(0);
    await rig.counters.laneLeft(model, "background", "laned-1");
    expect(await rig.counters.laneWaiting(model, "background")).toBe(1);
  });

  it("forgets a job in flight whose end was never reported once its entry expires", async () => {
    const model = `lanes-${randomUUID().slice(0, 8)}`;
    const admit = (id: string, runTtlMs: number) =>
      rig.counters.admit({
        completionId: id,
        accountId: "lost",
        keyId: "lost-key",
        model,
        tokens: 0,
        countsAsRequest: false,
        limits: LIMITS,
        waitTtlMs: runTtlMs,
        runTtlMs,
      });
    await admit("lost-1", 300);
    expect((await admit("lost-2", 300)).rank).toBe(1);
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect((await admit("lost-3", 300)).rank).toBe(0);
  });
});
