import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { InferenceGateway } from "../../src/api/inference/jobs/inferenceGateway.ts";
import { StillQueuedError } from "../../src/api/inference/jobs/stillQueuedError.ts";
import type { CompletionJob } from "../../src/contracts/completionJob.ts";
import { jobPriority } from "../../src/contracts/lanes.ts";
import { eventually } from "../support/eventually.ts";
import { createTestRedis, type TestRedis } from "../support/testRedis.ts";
import { startTestGateway, type TestGateway } from "./testGateway.ts";

/**
 * The `: queued position=N` a stream is told, from the gateway's reads (real Redis and BullMQ, no
 * worker consuming). The waiting count is shared by requests of the same few milliseconds
 * (SHARED_READ_MS; here a whole minute, so every later request shares the first one's count): a shared
 * count was read before the later job was queued, and must not be taken for its place.
 */
const MODEL = "position-model";

describe("queued position with a shared waiting count", () => {
  let redis: TestRedis;
  let test: TestGateway;
  let gateway: InferenceGateway;

  beforeAll(async () => {
    redis = await createTestRedis();
    // A live worker for the model, that takes nothing: the jobs stay in line.
    test = await startTestGateway(redis, MODEL, { jobIdleTimeoutMs: 10_000, sharedReadMs: 60_000 });
    gateway = test.gateway;
  });

  afterAll(async () => {
    await test?.close();
    await redis?.close();
  });

  /** Queues a job of one account (its `inFlightBefore`-th in flight) and resolves with the place it is told. */
  async function queue(id: string, inFlightBefore: number): Promise<number> {
    const job: Omit<CompletionJob, "replyTo"> = {
      completionId: id,
      endpoint: "embeddings",
      model: MODEL,
      accountId: "acc-1",
      keyId: "key-1",
      created: 1_700_000_000,
      lane: "interactive",
      priority: jobPriority("interactive", inFlightBefore),
      work: { kind: "embeddings", input: ["x"] },
    };
    let told: number | undefined;
    const started = gateway.start(job, { reasoning: false, startTimeoutMs: 200, keepQueued: true, onPosition: (position) => (told = position) });
    // Nobody takes it: left in line once the start timeout passed.
    await expect(started).rejects.toBeInstanceOf(StillQueuedError);
    return eventually(async () => told);
  }

  it("tells the first job 1, the next ones of the same moment their own places (2, then 3 for one ranked past the counted priorities)", async () => {
    expect(await queue("pos-1", 0)).toBe(1);
    // Shares the first request's count (1, read before this job was queued): its place is read instead.
    expect(await queue("pos-2", 1)).toBe(2);
    // Ranked past the priorities counted one by one: the whole waiting count, read afresh (an upper bound), not the shared 1.
    expect(await queue("pos-3", 40)).toBe(3);
  });
});
