import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AbandonmentWatch } from "../../src/api/inference/jobs/abandonmentWatch.ts";
import { CompletionQueues } from "../../src/api/inference/jobs/completionQueues.ts";
import { CompletionRecords } from "../../src/api/inference/jobs/completionRecords.ts";
import { DeltaSubscriber } from "../../src/api/inference/jobs/deltaSubscriber.ts";
import { InferenceGateway } from "../../src/api/inference/jobs/inferenceGateway.ts";
import { decodeCancelMessage } from "../../src/contracts/cancelMessage.ts";
import type { CompletionJob } from "../../src/contracts/completionJob.ts";
import type { DeltaMessage } from "../../src/contracts/deltaMessage.ts";
import { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import { encodeReplyBatch, encodeReplyEntry } from "../../src/contracts/replyBatch.ts";
import { WorkerPresence } from "../../src/contracts/workerPresence.ts";
import { silentLogger } from "../../src/observability/logger.ts";
import { createRedis, type Redis } from "../../src/redis/createRedis.ts";
import { eventually } from "../support/eventually.ts";
import { createTestRedis, type TestRedis } from "../support/testRedis.ts";

/**
 * When the API gives up on a reply for the platform's reason (here: its job silent for the idle
 * timeout), it tells the worker what the client was sent (a `lost` cancel) and notes the same for the
 * sweeper's refund (UndeliveredNotes): the completion tokens of the deltas a stream's client was sent,
 * -1 for a whole answer whose client got nothing. Real Redis and BullMQ; the worker's messages are
 * written as a worker writes them (reply channel and replay stream).
 */
const MODEL = "undelivered-model";

describe("notes of replies the API gave up on", () => {
  let redis: TestRedis;
  let keys: InferenceKeys;
  let queues: CompletionQueues;
  let subscriber: DeltaSubscriber;
  let gateway: InferenceGateway;
  const notes: [string, number][] = [];
  const cancels: unknown[] = [];
  let listener: Redis;

  beforeAll(async () => {
    redis = await createTestRedis();
    keys = new InferenceKeys(redis.prefix);
    queues = new CompletionQueues(redis.redis, keys);
    subscriber = new DeltaSubscriber(redis.redis, keys);
    const records = new CompletionRecords(redis.redis, keys, 3600);
    const abandonment = new AbandonmentWatch({ records, queues, graceMs: 60_000, lastMessage: (id) => records.lastMessage(id), logger: silentLogger });
    gateway = new InferenceGateway({
      presence: new WorkerPresence(redis.redis, keys),
      queues,
      subscriber,
      records,
      abandonment,
      undelivered: { note: (completionId, delivered) => notes.push([completionId, delivered]) },
      limits: { jobIdleTimeoutMs: 400, queueMaxWaiting: 1000 },
    });
    await redis.redis.zadd(keys.modelWorkers(MODEL), Date.now() + 600_000, "test-presence");
    listener = createRedis(redis.target, { kind: "subscriber" });
    listener.on("message", (_channel: string, text: string) => cancels.push(decodeCancelMessage(text)));
    await listener.subscribe(keys.cancelChannel());
  });

  afterAll(async () => {
    listener?.disconnect();
    await subscriber?.close();
    await queues?.close();
    await redis?.close();
  });

  const job = (id: string): Omit<CompletionJob, "replyTo"> => ({
    completionId: id,
    endpoint: "embeddings",
    model: MODEL,
    accountId: "acc-1",
    keyId: "key-1",
    created: 1_700_000_000,
    lane: "interactive",
    work: { kind: "embeddings", input: ["x"] },
  });

  /** Writes messages of a completion as its worker does: to the reply channel and the replay stream. */
  async function write(completionId: string, messages: DeltaMessage[]): Promise<void> {
    for (const message of messages) {
      const json = JSON.stringify(message);
      await redis.redis.xadd(keys.replayStream(completionId), "*", "m", json);
      await redis.redis.publish(subscriber.replyTo, encodeReplyBatch([encodeReplyEntry(completionId, json)]));
    }
  }

  /** Starts the job, lets its "worker" write `messages`, then go silent; resolves with what the client read before the request ended. */
  async function silentAfter(id: string, streamed: boolean, messages: DeltaMessage[]): Promise<DeltaMessage[]> {
    const starting = gateway.start(job(id), { reasoning: false, startTimeoutMs: 5_000, streamed });
    await eventually(async () => ((await queues.waitingCount(MODEL)) > 0 || (await redis.redis.exists(keys.completionRecord(id))) ? true : undefined));
    await write(id, messages);
    const running = await starting;
    const read: DeltaMessage[] = [];
    await expect(
      (async () => {
        for (;;) read.push(await running.next());
      })(),
    ).rejects.toThrow(/stopped answering/);
    return read;
  }

  it("given a stream cut after two deltas, notes their tokens and tells the worker the same", async () => {
    const read = await silentAfter("stream-1", true, [
      { seq: 0, type: "started" },
      { seq: 1, type: "delta", delta: { content: "Hello" }, tokens: 3 },
      { seq: 2, type: "delta", delta: { content: " there" }, tokens: 4 },
    ]);
    expect(read.map((m) => m.seq)).toEqual([1, 2]);
    expect(notes).toContainEqual(["stream-1", 7]);
    await eventually(async () => (cancels.some((c) => (c as { completionId: string }).completionId === "stream-1") ? true : undefined));
    expect(cancels).toContainEqual({ completionId: "stream-1", reason: "lost", deliveredThroughSeq: 2 });
  });

  it("given a whole answer (not streamed), notes that its client was sent nothing", async () => {
    await silentAfter("whole-1", false, [
      { seq: 0, type: "started" },
      { seq: 1, type: "delta", delta: { content: "Hello" }, tokens: 3 },
    ]);
    expect(notes).toContainEqual(["whole-1", -1]);
  });

  it("given a stream cut before any delta, notes that nothing was sent", async () => {
    await silentAfter("stream-2", true, [{ seq: 0, type: "started" }]);
    expect(notes).toContainEqual(["stream-2", -1]);
  });

  it("given a delta without its token count, notes nothing (what was sent is not known here)", async () => {
    await silentAfter("stream-3", true, [
      { seq: 0, type: "started" },
      { seq: 1, type: "delta", delta: { content: "Hello" } },
    ]);
    expect(notes.map(([id]) => id)).not.toContain("stream-3");
  });
});
