import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DeltaSubscriber } from "../../src/api/inference/jobs/deltaSubscriber.ts";
import { type CancelReason, encodeCancelMessage } from "../../src/contracts/cancelMessage.ts";
import type { CompletionJob } from "../../src/contracts/completionJob.ts";
import type { DeltaMessage, UnsequencedDeltaMessage } from "../../src/contracts/deltaMessage.ts";
import { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import { ModelRegistry, type RegisteredModel } from "../../src/models/modelRegistry.ts";
import { silentLogger } from "../../src/observability/logger.ts";
import { createRedis, type Redis } from "../../src/redis/createRedis.ts";
import { writeTinyModel, type TinyModelInfo } from "../../tools/gguf/tinyModel.ts";
import { CoalescingWindow } from "../../workers/completion/coalescingWindow.ts";
import { CompletionJobRunner } from "../../workers/completion/completionJobRunner.ts";
import { DeltaPublisher } from "../../workers/completion/deltaPublisher.ts";
import { JobCancellations } from "../../workers/completion/jobCancellations.ts";
import { ReplayReader } from "../../workers/completion/replayReader.ts";
import type { RunMode } from "../../workers/completion/resumption.ts";
import { TurnWriter } from "../../workers/completion/turnWriter.ts";
import { UsageRecorder } from "../../workers/completion/usageRecorder.ts";
import { createLlama } from "../../workers/engines/embedded/createLlama.ts";
import { EmbeddedEngine } from "../../workers/engines/embedded/embeddedEngine.ts";
import type { ChatRequest, Engine } from "../../workers/engines/engine.ts";
import { greedy } from "../support/engines/engineTestKit.ts";
import { eventually } from "../support/eventually.ts";
import { createTestDatabase, type TestDatabase } from "../support/testDatabase.ts";
import { createTestRedis, TEST_REDIS_URL, type TestRedis } from "../support/testRedis.ts";
import { TINY_CHAT, tinyModelEntries } from "../support/testPlatform.ts";
import { createBudgetedAccount } from "../usage/usageFixtures.ts";
import { completionEvents } from "./inferenceSteps.ts";

/** The engine's chat deltas held back, each passed on only once the test lets one more through. */
class GatedEngine {
  allowed = 0;
  readonly engine: Engine;
  constructor(inner: Engine) {
    this.engine = {
      ...inner,
      capabilities: () => inner.capabilities(),
      countChatTokens: (messages, tools) => inner.countChatTokens(messages, tools),
      countTokens: (text) => inner.countTokens(text),
      chat: async (request, onDelta, signal, options) => {
        const deltas: Parameters<typeof onDelta>[0][] = [];
        const result = await inner.chat(request, (delta) => deltas.push(delta), signal, options);
        for (const [index, delta] of deltas.entries()) {
          while (index >= this.allowed) {
            if (signal.aborted) throw signal.reason;
            await new Promise((resolve) => setTimeout(resolve, 10));
          }
          onDelta(delta);
        }
        return result;
      },
    };
  }
}

/**
 * CompletionJobRunner and a cancel of reason `lost` (the API ended the request early for the platform's
 * reason and says what its client was sent), with real Redis pub/sub, replay streams, PostgreSQL and the
 * tiny embedded model: the worker charges the prompt and the tokens of the deltas the client was sent,
 * not what it generated.
 */
describe("a job whose request the API ended early (cancel `lost` with deliveredThroughSeq)", () => {
  let db: TestDatabase;
  let testRedis: TestRedis;
  let writerRedis: Redis;
  let keys: InferenceKeys;
  let subscriber: DeltaSubscriber;
  let cancellations: JobCancellations;
  let dir: string;
  let tiny: TinyModelInfo;
  let inner: EmbeddedEngine;
  let gated: GatedEngine;
  let chatModel: RegisteredModel;
  let runner: CompletionJobRunner;
  let accountId: string;

  beforeAll(async () => {
    db = await createTestDatabase();
    testRedis = await createTestRedis();
    writerRedis = createRedis(TEST_REDIS_URL, { kind: "worker" });
    keys = new InferenceKeys(testRedis.prefix);
    subscriber = new DeltaSubscriber(testRedis.redis, keys);
    await subscriber.ready;
    cancellations = new JobCancellations(TEST_REDIS_URL, keys);
    await cancellations.ready;
    dir = await mkdtemp(join(tmpdir(), "lost-charge-"));
    tiny = await writeTinyModel(join(dir, "tiny.gguf"));
    inner = await EmbeddedEngine.load({ modelPath: tiny.path, threads: 1, contextSize: 1024, maxConcurrency: 2 }, { llama: await createLlama({ gpu: false }) });
    gated = new GatedEngine(inner);
    chatModel = new ModelRegistry("test-1", tinyModelEntries(tiny.path)).get(TINY_CHAT)!;
    runner = new CompletionJobRunner({
      model: chatModel,
      engine: gated.engine,
      usage: new UsageRecorder(db.pool),
      publisherFor,
      replay: new ReplayReader(testRedis.redis, keys),
      now: () => new Date(),
      logger: silentLogger,
      cancellations,
    });
    accountId = await createBudgetedAccount(db.pool, 10_000_000_000);
  });
  afterAll(async () => {
    cancellations?.close();
    await inner?.close();
    await subscriber?.close();
    writerRedis?.disconnect();
    await testRedis?.close();
    await db?.drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  // No coalescing: every delta the engine passes on is a message of its own.
  const publisherFor = (job: { completionId: string; replyTo: string }, firstSeq: number) =>
    new DeltaPublisher(keys, job, { window: new CoalescingWindow(0), writer: new TurnWriter(writerRedis), replayTtlSeconds: 60, replayMaxLen: 1000, firstSeq });

  const request: ChatRequest = { ...greedy, maxTokens: 24, messages: [{ role: "user", content: "Hello there" }] };
  const chatJob = (): CompletionJob => ({
    completionId: `chatcmpl-${randomUUID().replaceAll("-", "")}`,
    endpoint: "chat.completions",
    model: TINY_CHAT,
    accountId,
    keyId: randomUUID(),
    created: 1,
    replyTo: subscriber.replyTo,
    work: { kind: "chat", request },
  });

  /** Runs the job with `deltas` deltas let through; resolves once the feed got them (numbered from `fromSeq`), with the run. */
  async function runUntil(job: CompletionJob, deltas: number, mode: RunMode = "new", fromSeq = 0) {
    const feed = subscriber.open(job.completionId);
    gated.allowed = deltas;
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
    const dead = publisherFor(job, 0);
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
