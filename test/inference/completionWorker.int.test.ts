import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { CompletionQueues } from "../../src/messaging/completionQueues.ts";
import type { CompletionJob } from "../../src/messaging/completionJob.ts";
import { createRedis, type Redis } from "../../src/messaging/createRedis.ts";
import { InferenceKeys } from "../../src/messaging/inferenceKeys.ts";
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

  it("waits on one blocking connection per slot (a fetch loop of concurrency 1 per slot), and takes an arriving job at once", async () => {
    // A BullMQ worker with room for a second job fetches again after a job arrived and starts the job
    // only once that fetch has answered: a round trip on the way to every first token at low load.
    // With one loop of concurrency 1 per slot, every idle slot blocks on the queue's marker itself.
    await start(4);
    const blocked = async () => {
      const clients = (await redis.redis.client("LIST")) as string;
      // BullMQ names its blocking connections after the queue's prefix: other test files' workers do not count.
      const ours = clients.split("\n").filter((line) => line.includes(` name=${redis.prefix}:`));
      return ours.filter((line) => / flags=b /.test(line) && / cmd=bzpopmin /.test(line)).length;
    };
    await eventually(async () => ((await blocked()) === 4 ? true : undefined));
    await queues.enqueue(job("idle-1", keys));
    await eventually(async () => (runner.started.includes("idle-1") ? true : undefined));
    await eventually(async () => ((await blocked()) === 3 ? true : undefined));
  });
});
