import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DeltaSubscriber } from "../../src/api/inference/jobs/deltaSubscriber.ts";
import { type CancelReason, encodeCancelMessage } from "../../src/contracts/cancelMessage.ts";
import type { CompletionJob } from "../../src/contracts/completionJob.ts";
import type { DeltaMessage, UnsequencedDeltaMessage } from "../../src/contracts/deltaMessage.ts";
import type { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import { silentLogger } from "../../src/observability/logger.ts";
import { CompletionJobRunner } from "../../workers/completion/completionJobRunner.ts";
import { JobCancellations } from "../../workers/completion/jobCancellations.ts";
import { ReplayReader } from "../../workers/completion/replayReader.ts";
import type { RunMode } from "../../workers/completion/resumption.ts";
import { UsageRecorder } from "../../workers/completion/usageRecorder.ts";
import type { EmbeddedEngine } from "../../workers/engines/embedded/embeddedEngine.ts";
import type { ChatRequest } from "../../workers/engines/engine.ts";
import { greedy } from "../support/engines/engineTestKit.ts";
import { eventually } from "../support/eventually.ts";
import type { TestDatabase } from "../support/testDatabase.ts";
import { TEST_REDIS_URL, type TestRedis } from "../support/testRedis.ts";
import { TINY_CHAT } from "../support/testPlatform.ts";
import { gatedEngine } from "./gatedEngine.ts";
import { completionEvents } from "./inferenceSteps.ts";
import { type JobRunnerHarness, startJobRunnerHarness } from "./jobRunnerHarness.ts";

/**
 * CompletionJobRunner and a cancel of reason `lost` (the API ended the request early for the platform's
 * reason and says what its client was sent), with real Redis pub/sub, replay streams, PostgreSQL and the
 * tiny embedded model: the worker charges the prompt and the tokens of the deltas the client was sent,
 * not what it generated.
 */
describe("a job whose request the API ended early (cancel `lost` with deliveredThroughSeq)", () => {
  let harness: JobRunnerHarness;
  let db: TestDatabase;
  let testRedis: TestRedis;
  let keys: InferenceKeys;
  let subscriber: DeltaSubscriber;
  let cancellations: JobCancellations;
  let inner: EmbeddedEngine;
  const gate = { allowed: 0 };
  let runner: CompletionJobRunner;

  beforeAll(async () => {
    harness = await startJobRunnerHarness("lost-charge-");
    ({ db, testRedis, keys, subscriber, engine: inner } = harness);
    cancellations = new JobCancellations(TEST_REDIS_URL, keys);
    await cancellations.ready;
    runner = new CompletionJobRunner({
      model: harness.registry.get(TINY_CHAT)!,
      engine: gatedEngine(inner, gate),
      usage: new UsageRecorder(db.pool),
      publisherFor: harness.publisherFor,
      replay: new ReplayReader(testRedis.redis, keys),
      now: () => new Date(),
      logger: silentLogger,
      cancellations,
    });
  });
  afterAll(async () => {
    cancellations?.close();
    await harness?.close();
  });

  const request: ChatRequest = { ...greedy, maxTokens: 24, messages: [{ role: "user", content: "Hello there" }] };
  const chatJob = (): CompletionJob => harness.chatJob(request);

  /** Runs the job with `deltas` deltas let through; resolves once the feed got them (numbered from `fromSeq`), with the run. */
  async function runUntil(job: CompletionJob, deltas: number, mode: RunMode = "new", fromSeq = 0) {
    const feed = subscriber.open(job.completionId);
    gate.allowed = deltas;
    const running = runner.run(job, new AbortController().signal, mode);
    const received: DeltaMessage[] = [];
    const newDeltas = () => received.filter((m) => m.type === "delta" && m.seq >= fromSeq).length;
    while (newDeltas() < deltas) {
      const message = await feed.next(10_000);
      if (!message) throw new Error(`only ${JSON.stringify(received)} came`);
      received.push(message);
    }
    return { feed, running, received };
  }

  /** The cancel the API publishes for a job a worker runs (CompletionQueues.cancel; the job is not on a queue here). */
  const cancel = async (job: CompletionJob, reason: CancelReason, deliveredThroughSeq?: number) => {
    await testRedis.redis.publish(
      keys.cancelChannel(),
      encodeCancelMessage({ completionId: job.completionId, reason, ...(deliveredThroughSeq === undefined ? {} : { deliveredThroughSeq }) }),
    );
  };

  const deltaTokens = (messages: DeltaMessage[], throughSeq: number) =>
    messages.reduce((sum, m) => sum + (m.type === "delta" && m.seq <= throughSeq ? (m.tokens ?? 0) : 0), 0);

  it("charges the prompt and the tokens of the deltas the client was sent, not what the worker generated", async () => {
    const job = chatJob();
    const { feed, running, received } = await runUntil(job, 5);
    feed.close();
    const deltas = received.filter((m): m is Extract<DeltaMessage, { type: "delta" }> => m.type === "delta");
    expect(deltas).toHaveLength(5);
    // The client was sent the first two deltas only (the rest was lost on its way).
    const through = deltas[1]!.seq;
    const sentTokens = deltaTokens(deltas, through);
    const generatedTokens = deltaTokens(deltas, Number.MAX_SAFE_INTEGER);
    expect(sentTokens).toBeGreaterThan(0);
    expect(generatedTokens).toBeGreaterThan(sentTokens);
    await cancel(job, "lost", through);
    await running;
    const events = await completionEvents(db.pool, job.completionId);
    expect(events).toHaveLength(1);
    const prompt = await inner.countChatTokens(request.messages, request.tools);
    expect(events[0]!.data).toMatchObject({ outcome: "cancelled", promptTokens: prompt, completionTokens: sentTokens });
    // The stream's end says what was charged (a client resuming it sees its usage).
    const replayed = await new ReplayReader(testRedis.redis, keys).read(job.completionId);
    expect(replayed.at(-1)).toMatchObject({ type: "error", error: { kind: "cancelled" }, usage: { completionTokens: sentTokens } });
  });

  it("a request whose client got nothing (deliveredThroughSeq -1) is charged nothing", async () => {
    const job = chatJob();
    const { feed, running } = await runUntil(job, 3);
    feed.close();
    await cancel(job, "lost", -1);
    await running;
    const events = await completionEvents(db.pool, job.completionId);
    expect(events).toHaveLength(1);
    expect(events[0]!.data).toMatchObject({ outcome: "cancelled", promptTokens: 0, completionTokens: 0 });
  });

  it("after a crash, counts what the client was sent of the earlier run from the replay stream", async () => {
    const job = chatJob();
    // The run that died wrote `started` and two deltas with their counts.
    const dead = harness.publisherFor(job, 0);
    const before: UnsequencedDeltaMessage[] = [
      { type: "started" },
      { type: "delta", delta: { content: "Hello!" }, tokens: 2 },
      { type: "delta", delta: { content: " I am" }, tokens: 3 },
    ];
    for (const message of before) {
      if (message.type === "delta") dead.delta({ ...message.delta, tokens: message.tokens! });
      else dead.send(message);
    }
    await dead.close();
    const { feed, running, received } = await runUntil(job, 2, "redelivered", 3);
    feed.close();
    // The continuation's deltas come after the dead run's (seq 3 on), with counts of their own.
    expect(deltaTokens(received, Number.MAX_SAFE_INTEGER)).toBeGreaterThan(5);
    expect(received.at(-1)).toMatchObject({ type: "delta", seq: 4 });
    // The client was sent the dead run's first delta (seq 1) only.
    await cancel(job, "lost", 1);
    await running;
    const events = await completionEvents(db.pool, job.completionId);
    expect(events).toHaveLength(1);
    expect(events[0]!.data).toMatchObject({ outcome: "cancelled", completionTokens: 2 });
  });

  it("an owner's cancel still charges what was generated until it", async () => {
    const job = chatJob();
    const { feed, running, received } = await runUntil(job, 4);
    feed.close();
    await cancel(job, "user");
    await running;
    const generated = deltaTokens(received, Number.MAX_SAFE_INTEGER);
    await eventually(async () => ((await completionEvents(db.pool, job.completionId)).length === 1 ? true : undefined));
    const events = await completionEvents(db.pool, job.completionId);
    expect(events[0]!.data).toMatchObject({ outcome: "cancelled", completionTokens: generated });
  });
});
