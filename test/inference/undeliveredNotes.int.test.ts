import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CompletionQueues } from "../../src/api/inference/jobs/completionQueues.ts";
import type { DeltaSubscriber } from "../../src/api/inference/jobs/deltaSubscriber.ts";
import type { InferenceGateway } from "../../src/api/inference/jobs/inferenceGateway.ts";
import { decodeCancelMessage } from "../../src/contracts/cancelMessage.ts";
import type { CompletionJob } from "../../src/contracts/completionJob.ts";
import type { DeltaMessage } from "../../src/contracts/deltaMessage.ts";
import type { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import { encodeReplyBatch, encodeReplyEntry } from "../../src/contracts/replyBatch.ts";
import { createRedis, type Redis } from "../../src/redis/createRedis.ts";
import { eventually } from "../support/eventually.ts";
import { startRedisServer } from "../support/redisServer.ts";
import { createTestRedis, type TestRedis } from "../support/testRedis.ts";
import { startTestGateway, type TestGateway } from "./testGateway.ts";

/**
 * When the API gives up on a reply for the platform's reason, it tells the worker what the client was
 * sent (a `lost` cancel). When part of the reply was lost with Redis (a message missing that the replay
 * stream cannot give either), it also notes the same for the sweeper's refund (UndeliveredNotes): the
 * completion tokens of the deltas a stream's client was sent, -1 for a whole answer whose client got
 * nothing. A reply that only fell silent (the idle timeout) is still whole in its replay stream for a
 * GET or a retry: nothing is noted; and silence while Redis itself does not answer is a 503. Real
 * Redis (a private one for the freeze) and BullMQ; the worker's messages are written as a worker writes
 * them (reply channel and replay stream).
 */
const MODEL = "undelivered-model";

describe("notes of replies the API gave up on", () => {
  let redis: TestRedis;
  let keys: InferenceKeys;
  let queues: CompletionQueues;
  let subscriber: DeltaSubscriber;
  let gateway: InferenceGateway;
  let test: TestGateway;
  const notes: [string, number][] = [];
  const cancels: unknown[] = [];
  let listener: Redis;

  beforeAll(async () => {
    redis = await createTestRedis();
    test = await startTestGateway(redis, MODEL, {
      jobIdleTimeoutMs: 400,
      undelivered: { note: (completionId, delivered) => notes.push([completionId, delivered]) },
    });
    ({ keys, queues, subscriber, gateway } = test);
    listener = createRedis(redis.target, { kind: "subscriber" });
    listener.on("message", (_channel: string, text: string) => cancels.push(decodeCancelMessage(text)));
    await listener.subscribe(keys.cancelChannel());
  });

  afterAll(async () => {
    listener?.disconnect();
    await test?.close();
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

  /**
   * Starts the job, lets its "worker" write `messages`; with `gapAt`, the message of that number is
   * written to nobody (lost with Redis) and the next one is sent, so the reply has a gap it cannot
   * fill; without, the worker goes silent. Resolves with what the client read and the error it ended with.
   */
  async function endedAfter(id: string, streamed: boolean, messages: DeltaMessage[], gapAt?: number): Promise<{ read: DeltaMessage[]; error: Error }> {
    const starting = gateway.start(job(id), { reasoning: false, startTimeoutMs: 5_000, streamed });
    await eventually(async () => ((await queues.waitingCount(MODEL)) > 0 || (await redis.redis.exists(keys.completionRecord(id))) ? true : undefined));
    await write(
      id,
      messages.filter((m) => m.seq !== gapAt),
    );
    const running = await starting;
    const read: DeltaMessage[] = [];
    const error = await (async () => {
      for (;;) read.push(await running.next());
    })().catch((e: unknown) => e as Error);
    return { read, error };
  }

  const reply: DeltaMessage[] = [
    { seq: 0, type: "started" },
    { seq: 1, type: "delta", delta: { content: "Hello" }, tokens: 3 },
    { seq: 2, type: "delta", delta: { content: " there" }, tokens: 4 },
    { seq: 3, type: "delta", delta: { content: " you" }, tokens: 2 },
    { seq: 4, type: "finish", finishReason: "stop" },
  ];

  it("given a stream whose fourth message was lost with Redis, notes the tokens of the deltas sent and tells the worker the same", async () => {
    const { read, error } = await endedAfter("stream-1", true, reply, 3);
    expect(read.map((m) => m.seq)).toEqual([1, 2]);
    expect(error.message).toMatch(/lost with Redis/);
    expect(notes).toContainEqual(["stream-1", 7]);
    await eventually(async () => (cancels.some((c) => (c as { completionId: string }).completionId === "stream-1") ? true : undefined));
    expect(cancels).toContainEqual({ completionId: "stream-1", reason: "lost", deliveredThroughSeq: 2 });
  });

  it("given a whole answer (not streamed) with a message lost, notes that its client was sent nothing", async () => {
    await endedAfter("whole-1", false, reply, 2);
    expect(notes).toContainEqual(["whole-1", -1]);
  });

  it("given a stream that lost its first delta, notes that nothing was sent", async () => {
    await endedAfter("stream-2", true, reply, 1);
    expect(notes).toContainEqual(["stream-2", -1]);
  });

  it("given a delta without its token count before the loss, notes nothing (what was sent is not known here)", async () => {
    await endedAfter("stream-3", true, [{ seq: 0, type: "started" }, { seq: 1, type: "delta", delta: { content: "Hello" } }, ...reply.slice(2)], 3);
    expect(notes.map(([id]) => id)).not.toContain("stream-3");
  });

  it("given a reply that only fell silent (still whole in its replay stream), stops it as abandoned and notes nothing: a 500, Redis answering", async () => {
    const { read, error } = await endedAfter("silent-1", true, reply.slice(0, 3));
    expect(read.map((m) => m.seq)).toEqual([1, 2]);
    expect(error.message).toMatch(/stopped answering/);
    expect(notes.map(([id]) => id)).not.toContain("silent-1");
    // Charged for what it generated, which a GET of it reads: not for what this client was sent.
    await eventually(async () => (cancels.some((c) => (c as { completionId: string }).completionId === "silent-1") ? true : undefined));
    expect(cancels).toContainEqual({ completionId: "silent-1", reason: "abandoned" });
  });
});

describe("a reply silent while Redis itself does not answer", () => {
  it("ends with 503 redis_unavailable (the outage's), not the model's 500", async () => {
    const server = await startRedisServer();
    const redis = await createTestRedis(server.url);
    const { keys, subscriber, gateway, close } = await startTestGateway(redis, MODEL, { jobIdleTimeoutMs: 500 });
    try {
      const starting = gateway.start(
        {
          completionId: "frozen-1",
          endpoint: "embeddings",
          model: MODEL,
          accountId: "a",
          keyId: "k",
          created: 1,
          lane: "interactive",
          work: { kind: "embeddings", input: ["x"] },
        },
        { reasoning: false, startTimeoutMs: 5_000, streamed: true },
      );
      await eventually(async () => ((await redis.redis.exists(keys.completionRecord("frozen-1"))) ? true : undefined));
      const json = JSON.stringify({ seq: 0, type: "started" });
      await redis.redis.xadd(keys.replayStream("frozen-1"), "*", "m", json);
      await redis.redis.publish(subscriber.replyTo, encodeReplyBatch([encodeReplyEntry("frozen-1", json)]));
      const running = await starting;
      server.pause();
      await expect(running.next()).rejects.toMatchObject({ status: 503, code: "redis_unavailable" });
    } finally {
      server.resume();
      await close();
      await redis.close();
      await server.stop();
    }
  }, 30_000);
});
