import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DeltaMessage } from "../../src/contracts/deltaMessage.ts";
import { silentLogger } from "../../src/observability/logger.ts";
import { CompletionJobRunner } from "../../workers/completion/completionJobRunner.ts";
import { ReplayFence } from "../../workers/completion/replayFence.ts";
import { ReplayReader } from "../../workers/completion/replayReader.ts";
import { UsageRecorder } from "../../workers/completion/usageRecorder.ts";
import { greedy } from "../support/engines/engineTestKit.ts";
import { TINY_CHAT } from "../support/testPlatform.ts";
import { eventually } from "../support/eventually.ts";
import { gatedEngine } from "./gatedEngine.ts";
import { completionEvents } from "./inferenceSteps.ts";
import { type JobRunnerHarness, startJobRunnerHarness } from "./jobRunnerHarness.ts";

/**
 * Runs of one job fenced in its replay stream (ReplayFence): a worker taken for dead (cut off from Redis
 * longer than its lock) whose engine goes on, and the worker that took the job over. Real Redis, real
 * PostgreSQL, the tiny model, the API's DeltaSubscriber (messages published to another process).
 */
describe("a job's runs fenced in its replay stream", () => {
  let harness: JobRunnerHarness;
  let fence: ReplayFence;

  beforeAll(async () => {
    harness = await startJobRunnerHarness("fence-");
    fence = new ReplayFence(harness.testRedis.redis, harness.keys, { ttlSeconds: 60, maxLen: 1000 });
  });
  afterAll(async () => {
    await harness?.close();
  });

  const replayed = (completionId: string) => new ReplayReader(harness.testRedis.redis, harness.keys).read(completionId);
  const text = (messages: DeltaMessage[]) => messages.map((m) => (m.type === "delta" ? (m.delta.content ?? "") : "")).join("");
  const runner = (gate?: { allowed: number }) =>
    new CompletionJobRunner({
      model: harness.registry.get(TINY_CHAT)!,
      engine: gate ? gatedEngine(harness.engine, gate) : harness.engine,
      usage: new UsageRecorder(harness.db.pool),
      publisherFor: harness.publisherFor,
      fence,
      replay: new ReplayReader(harness.testRedis.redis, harness.keys),
      now: () => new Date(),
      logger: silentLogger,
    });

  it("a run whose job was taken over writes nothing more and records nothing; the client gets one generation, charged once", async () => {
    const job = harness.chatJob({ ...greedy, maxTokens: 24, messages: [{ role: "user", content: "Hello there" }] });
    const feed = harness.subscriber.open(job.completionId);
    const received: DeltaMessage[] = [];
    const reading = (async () => {
      for (;;) {
        const message = await feed.next(5_000);
        if (!message) return;
        received.push(message);
        if (message.type === "usage" || message.type === "error") return;
      }
    })();

    // The first run delivers three deltas, then its worker is cut off (its engine held, as if its writes waited in a partition).
    const gate = { allowed: 3 };
    const first = runner(gate).run(job, new AbortController().signal, "new", 1);
    await eventually(async () => (received.filter((m) => m.type === "delta").length === 3 ? true : undefined), 10_000);

    // Taken for dead: run 2 claims the stream, continues from the three deltas, ends the stream and records the usage.
    const second = await runner().run(job, new AbortController().signal, "redelivered", 2);
    await reading;
    feed.close();
    // The first run's engine goes on: its writes are refused, it stops, and records nothing.
    gate.allowed = Number.POSITIVE_INFINITY;
    expect(await first).toBeNull();

    const stream = await replayed(job.completionId);
    expect(stream.map((m) => m.seq)).toEqual(stream.map((_, i) => i));
    expect(received.map((m) => m.seq)).toEqual(stream.map((m) => m.seq));
    expect(text(received)).toBe(harness.tiny.greedyReply);
    expect(received.at(-1)).toMatchObject({ type: "usage", usage: second! });
    expect(await completionEvents(harness.db.pool, job.completionId)).toHaveLength(1);
  }, 60_000);

  it("claims: a later run supersedes an earlier; an earlier run's write after the claim is refused and reaches no API", async () => {
    const job = harness.chatJob({ ...greedy, maxTokens: 4, messages: [{ role: "user", content: "Hi" }] });
    const feed = harness.subscriber.open(job.completionId);
    let superseded = 0;
    const earlier = harness.publisherFor(job, 0, { run: 1, onSuperseded: () => superseded++ });
    earlier.send({ type: "started" });
    await earlier.settled();
    expect(await feed.next(1_000)).toEqual({ seq: 0, type: "started" });

    expect(await fence.claim(job.completionId, 3)).toBe("claimed");
    expect(await fence.claim(job.completionId, 2)).toBe("superseded");
    earlier.delta({ content: "stale" });
    earlier.send({ type: "finish", finishReason: "stop" });
    await earlier.settled();
    expect(earlier.superseded).toBe(true);
    expect(superseded).toBe(1);
    await expect(earlier.close()).rejects.toThrow(/later run/);
    expect(await feed.next(300)).toBeUndefined();
    feed.close();
    expect(await replayed(job.completionId)).toEqual([{ seq: 0, type: "started" }]);

    // A claim sent again after a reconnection (applied the first time) is the run's own.
    expect(await fence.claim(job.completionId, 3)).toBe("claimed");

    // A stream with entries of Redis's clock (the API ended the job before it started): later runs write unfenced.
    const ended = harness.chatJob({ ...greedy, maxTokens: 4, messages: [{ role: "user", content: "Hi" }] });
    await harness.testRedis.redis.xadd(
      harness.keys.replayStream(ended.completionId),
      "*",
      "m",
      JSON.stringify({ seq: 0, type: "error", error: { kind: "cancelled", message: "x", param: null } }),
    );
    expect(await fence.claim(ended.completionId, 2)).toBe("unfenced");
  }, 30_000);

  it("an append sent again after a reconnection, applied the first time, stands: the run is not taken as superseded", async () => {
    const job = harness.chatJob({ ...greedy, maxTokens: 4, messages: [{ role: "user", content: "Hi" }] });
    const stream = harness.keys.replayStream(job.completionId);
    let superseded = 0;
    const publisher = harness.publisherFor(job, 0, { run: 1, onSuperseded: () => superseded++ });
    publisher.send({ type: "started" });
    await publisher.settled();
    // Redis applied the next append, and its reply was lost with the connection: ioredis sends it again.
    await harness.testRedis.redis.xadd(stream, "1-2", "m", JSON.stringify({ seq: 1, type: "delta", delta: { content: "a" } }));
    publisher.delta({ content: "a" });
    publisher.send({ type: "finish", finishReason: "stop" });
    await publisher.close();
    expect(publisher.superseded).toBe(false);
    expect(superseded).toBe(0);
    expect((await replayed(job.completionId)).map((m) => m.seq)).toEqual([0, 1, 2]);
  }, 30_000);
});
