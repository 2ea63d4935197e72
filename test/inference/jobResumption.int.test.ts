import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DeltaSubscriber } from "../../src/api/inference/jobs/deltaSubscriber.ts";
import type { CompletionJob } from "../../src/contracts/completionJob.ts";
import type { DeltaMessage, UnsequencedDeltaMessage } from "../../src/contracts/deltaMessage.ts";
import type { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import { placeHold } from "../../src/ledger/budget/placeHold.ts";
import { costMicroChf } from "../../src/ledger/pricing/costMicroChf.ts";
import type { RegisteredModel } from "../../src/models/modelRegistry.ts";
import { silentLogger } from "../../src/observability/logger.ts";
import type { TinyModelInfo } from "../../tools/gguf/tinyModel.ts";
import { CompletionJobRunner } from "../../workers/completion/completionJobRunner.ts";
import { ReplayReader } from "../../workers/completion/replayReader.ts";
import type { RunMode } from "../../workers/completion/resumption.ts";
import { UsageRecorder } from "../../workers/completion/usageRecorder.ts";
import type { EmbeddedEngine } from "../../workers/engines/embedded/embeddedEngine.ts";
import type { ChatRequest } from "../../workers/engines/engine.ts";
import { greedy } from "../support/engines/engineTestKit.ts";
import type { TestDatabase } from "../support/testDatabase.ts";
import type { TestRedis } from "../support/testRedis.ts";
import { TINY_CHAT, TINY_EMBED } from "../support/testPlatform.ts";
import { budgetRow, createBudgetedAccount } from "../usage/usageFixtures.ts";
import { failingEngine } from "./failingEngine.ts";
import { completionEvents } from "./inferenceSteps.ts";
import { type JobRunnerHarness, startJobRunnerHarness } from "./jobRunnerHarness.ts";

/**
 * CompletionJobRunner running a job again after its worker died (BullMQ's redelivery), with real Redis
 * replay streams written by a "dead" run before it, real PostgreSQL and the tiny embedded model. What
 * the API's feed receives is checked through a real DeltaSubscriber.
 */
describe("a job run again after its worker died (CompletionJobRunner, Redis, PostgreSQL, tiny model)", () => {
  let harness: JobRunnerHarness;
  let db: TestDatabase;
  let testRedis: TestRedis;
  let keys: InferenceKeys;
  let subscriber: DeltaSubscriber;
  let tiny: TinyModelInfo;
  let engine: EmbeddedEngine;
  let chatModel: RegisteredModel;
  let embedModel: RegisteredModel;
  let accountId: string;
  const runners = new Map<RegisteredModel, CompletionJobRunner>();

  beforeAll(async () => {
    harness = await startJobRunnerHarness("resume-");
    ({ db, testRedis, keys, subscriber, tiny, engine, accountId } = harness);
    chatModel = harness.registry.get(TINY_CHAT)!;
    embedModel = harness.registry.get(TINY_EMBED)!;
  });
  afterAll(async () => {
    await harness?.close();
  });

  const publisherFor: JobRunnerHarness["publisherFor"] = (job, firstSeq) => harness.publisherFor(job, firstSeq);
  const runnerFor = (model: RegisteredModel) => {
    let runner = runners.get(model);
    if (!runner) {
      runner = new CompletionJobRunner({
        model,
        engine,
        usage: new UsageRecorder(db.pool),
        publisherFor,
        replay: new ReplayReader(testRedis.redis, keys),
        now: () => new Date(),
        logger: silentLogger,
      });
      runners.set(model, runner);
    }
    return runner;
  };

  const request = (overrides: Partial<ChatRequest> = {}): ChatRequest => ({
    ...greedy,
    maxTokens: 24,
    messages: [{ role: "user", content: "Hello there" }],
    ...overrides,
  });
  const chatJob = (overrides: Partial<ChatRequest> = {}): CompletionJob => harness.chatJob(request(overrides));

  /** What the dead worker wrote before it died: numbered from 0, to the replay stream and the API's channel. */
  async function deadRun(job: CompletionJob, messages: UnsequencedDeltaMessage[]): Promise<void> {
    const publisher = publisherFor(job, 0);
    for (const message of messages) {
      if (message.type === "delta") publisher.delta(message.delta);
      else publisher.send(message);
    }
    await publisher.close();
  }

  /** Runs the job (as BullMQ's redelivery would) and returns the messages the API's feed got, up to the terminal one. */
  async function runAgain(job: CompletionJob, before: UnsequencedDeltaMessage[], mode: RunMode = "redelivered"): Promise<DeltaMessage[]> {
    const feed = subscriber.open(job.completionId);
    await deadRun(job, before);
    const model = job.work.kind === "chat" ? chatModel : embedModel;
    await runnerFor(model).run(job, new AbortController().signal, mode);
    const received: DeltaMessage[] = [];
    for (;;) {
      const message = await feed.next(1_000);
      if (!message) break;
      received.push(message);
      if (message.type === "usage" || message.type === "error") break;
    }
    feed.close();
    return received;
  }

  const replayed = (job: CompletionJob) => new ReplayReader(testRedis.redis, keys).read(job.completionId);
  const text = (messages: DeltaMessage[]) => messages.map((m) => (m.type === "delta" ? (m.delta.content ?? "") : "")).join("");
  const seqs = (messages: DeltaMessage[]) => messages.map((m) => m.seq);
  const consecutive = (messages: DeltaMessage[]) => seqs(messages).every((seq, i) => seq === i);

  /** A normal run's usage, to compare with. */
  let reference: { promptTokens: number; completionTokens: number } | null = null;
  async function referenceUsage() {
    if (reference) return reference;
    const job = chatJob();
    const received = await runAgain(job, [], "new");
    const last = received.at(-1)!;
    if (last.type !== "usage") throw new Error("the reference run did not end with usage");
    expect(text(received)).toBe(tiny.greedyReply);
    reference = last.usage;
    return reference;
  }

  it("(a) nothing delivered: runs the job as new, from seq 0", async () => {
    const job = chatJob();
    const received = await runAgain(job, []);
    expect(consecutive(received)).toBe(true);
    expect(received[0]).toEqual({ seq: 0, type: "started" });
    expect(text(received)).toBe(tiny.greedyReply);
    expect(received.at(-1)).toMatchObject({ type: "usage", usage: await referenceUsage() });
    expect(await completionEvents(db.pool, job.completionId)).toHaveLength(1);
  });

  const recordFor = (job: CompletionJob, tokens: { promptTokens: number; completionTokens: number }) => {
    const now = new Date().toISOString();
    return new UsageRecorder(db.pool).record(
      {
        completionId: job.completionId,
        accountId,
        keyId: job.keyId,
        model: TINY_CHAT,
        endpoint: "chat.completions",
        ...tokens,
        reasoningTokens: 0,
        costMicroChf: 7,
        priceTableVersion: "test-1",
        outcome: "finished",
        startedAt: now,
        finishedAt: now,
        traceId: null,
      },
      {},
    );
  };

  it("(b) a stream that was ended, its usage recorded, is left alone, and nothing more is charged", async () => {
    const job = chatJob();
    await recordFor(job, { promptTokens: 1, completionTokens: 1 });
    const ended: UnsequencedDeltaMessage[] = [
      { type: "started" },
      { type: "delta", delta: { content: tiny.greedyReply } },
      { type: "finish", finishReason: "stop" },
      { type: "usage", usage: { promptTokens: 1, completionTokens: 1, reasoningTokens: 0 } },
    ];
    const received = await runAgain(job, ended);
    expect(seqs(received)).toEqual([0, 1, 2, 3]);
    expect(seqs(await replayed(job))).toEqual([0, 1, 2, 3]);
    expect(await completionEvents(db.pool, job.completionId)).toHaveLength(1);
  });

  it("a stream ended while its usage was still being recorded (PostgreSQL away, then its worker died): charges what its usage chunk said, sends nothing", async () => {
    const job = chatJob();
    const ended: UnsequencedDeltaMessage[] = [
      { type: "started" },
      { type: "delta", delta: { content: tiny.greedyReply } },
      { type: "finish", finishReason: "stop" },
      { type: "usage", usage: { promptTokens: 5, completionTokens: 3, reasoningTokens: 0 } },
    ];
    const received = await runAgain(job, ended);
    expect(seqs(received)).toEqual([0, 1, 2, 3]);
    expect(seqs(await replayed(job))).toEqual([0, 1, 2, 3]);
    const events = await completionEvents(db.pool, job.completionId);
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ type: "UsageRecorded", data: { promptTokens: 5, completionTokens: 3, outcome: "finished" } });
  });

  it("(b) usage recorded but the stream not ended: ends it from the record, charging nothing more", async () => {
    const job = chatJob();
    const usage = new UsageRecorder(db.pool);
    const now = new Date().toISOString();
    await usage.record(
      {
        completionId: job.completionId,
        accountId,
        keyId: job.keyId,
        model: TINY_CHAT,
        endpoint: "chat.completions",
        promptTokens: 11,
        completionTokens: 10,
        reasoningTokens: 0,
        costMicroChf: 7,
        priceTableVersion: "test-1",
        outcome: "finished",
        startedAt: now,
        finishedAt: now,
        traceId: null,
      },
      {},
    );
    const received = await runAgain(job, [
      { type: "started" },
      { type: "delta", delta: { content: tiny.greedyReply } },
      { type: "finish", finishReason: "stop" },
    ]);
    expect(received.slice(3)).toEqual([{ seq: 3, type: "usage", usage: { promptTokens: 11, completionTokens: 10, reasoningTokens: 0 } }]);
    expect(consecutive(received)).toBe(true);
    expect(await completionEvents(db.pool, job.completionId)).toHaveLength(1);
  });

  it("(c) started, nothing generated delivered: runs the engine again numbering on, with one `started`", async () => {
    const job = chatJob();
    const received = await runAgain(job, [{ type: "started" }]);
    expect(consecutive(received)).toBe(true);
    expect(received.filter((m) => m.type === "started")).toHaveLength(1);
    expect(text(received)).toBe(tiny.greedyReply);
    expect(received.at(-1)).toMatchObject({ type: "usage", usage: await referenceUsage() });
    expect(seqs(await replayed(job))).toEqual(seqs(received));
  });

  it("(d) text delivered: continues it as the same reply, numbering on; charged once: the prompt once, the delivered tokens plus the new", async () => {
    const base = await referenceUsage();
    const account = await createBudgetedAccount(db.pool, 10_000_000_000);
    const job = { ...chatJob(), accountId: account };
    const placed = await placeHold(db.pool, { holdId: job.completionId, accountId: account, amountMicroChf: 5_000, now: new Date() });
    expect(placed.ok).toBe(true);
    const prefix = "Hello! I am";
    const received = await runAgain(job, [
      { type: "started" },
      { type: "delta", delta: { content: "Hello!" } },
      { type: "delta", delta: { content: " I am" } },
    ]);
    expect(consecutive(received)).toBe(true);
    expect(received.filter((m) => m.type === "started")).toHaveLength(1);
    expect(text(received.slice(0, 3))).toBe(prefix);
    expect(text(received)).toBe(tiny.greedyReply);
    expect(received.at(-2)).toMatchObject({ type: "finish", finishReason: "stop" });
    const last = received.at(-1)!;
    expect(last).toMatchObject({ type: "usage", usage: { promptTokens: base.promptTokens, completionTokens: base.completionTokens } });
    const events = await completionEvents(db.pool, job.completionId);
    expect(events).toHaveLength(1);
    expect(events[0]!.data).toMatchObject({ outcome: "finished", promptTokens: base.promptTokens, completionTokens: base.completionTokens });
    // The hold was settled once, with the actual cost, and folded: nothing is held any more.
    const cost = costMicroChf({ promptTokens: base.promptTokens, completionTokens: base.completionTokens }, chatModel);
    const { rows } = await db.pool.query("SELECT count(*)::int AS n FROM budget_holds WHERE account_id = $1", [account]);
    expect(rows[0].n).toBe(0);
    const period = placed.ok ? placed.period.start : "";
    expect(await budgetRow(db.pool, account, period)).toMatchObject({ held: 0, spent: cost });
    // Run once more (a second redelivery): the stream was ended, nothing changes.
    await runnerFor(chatModel).run(job, new AbortController().signal, "redelivered");
    expect(seqs(await replayed(job))).toEqual(seqs(received));
    expect(await completionEvents(db.pool, job.completionId)).toHaveLength(1);
  });

  it("(d) a reply delivered up to its token limit is finished with `length` without generating", async () => {
    const job = chatJob({ maxTokens: 4 });
    const received = await runAgain(job, [{ type: "started" }, { type: "delta", delta: { content: "Hello! I am" } }]);
    expect(consecutive(received)).toBe(true);
    expect(received.slice(2).map((m) => m.type)).toEqual(["finish", "usage"]);
    expect(received.at(-2)).toMatchObject({ finishReason: "length" });
    expect(received.at(-1)).toMatchObject({ usage: { completionTokens: 4 } });
  });

  it("a reply delivered whole, whose usage was not recorded, is charged and ended", async () => {
    const base = await referenceUsage();
    const job = chatJob();
    const received = await runAgain(job, [
      { type: "started" },
      { type: "delta", delta: { content: tiny.greedyReply } },
      { type: "finish", finishReason: "stop" },
    ]);
    expect(received.slice(3).map((m) => m.type)).toEqual(["usage"]);
    expect(received.at(-1)).toMatchObject({ seq: 3, usage: { promptTokens: base.promptTokens } });
    expect(await completionEvents(db.pool, job.completionId)).toHaveLength(1);
  });

  it("a run's finish carries the engine's count, which a worker taking over after the finish charges (not the text counted again)", async () => {
    const base = await referenceUsage();
    const job = chatJob();
    const normal = await runAgain(job, [], "new");
    expect(normal.at(-2)).toMatchObject({ type: "finish", usage: { ...base, reasoningTokens: 0 } });
    // An engine whose own count differs from the tokenizer's count of the text (an upstream server's).
    const counted = { promptTokens: base.promptTokens + 13, completionTokens: 3, reasoningTokens: 0 };
    const takenOver = chatJob();
    const received = await runAgain(takenOver, [
      { type: "started" },
      { type: "delta", delta: { content: tiny.greedyReply } },
      { type: "finish", finishReason: "stop", usage: counted },
    ]);
    expect(received.at(-1)).toMatchObject({ seq: 3, type: "usage", usage: counted });
    const events = await completionEvents(db.pool, takenOver.completionId);
    expect(events).toHaveLength(1);
    expect(events[0]!.data).toMatchObject({ promptTokens: counted.promptTokens, completionTokens: 3 });
  });

  it("a reply that cannot be continued (logprobs) ends with an error event; the prompt and the delivered tokens are charged", async () => {
    const base = await referenceUsage();
    const job = chatJob({ logprobs: true });
    const received = await runAgain(job, [{ type: "started" }, { type: "delta", delta: { content: "Hello! I am", logprobs: [] } }]);
    expect(consecutive(received)).toBe(true);
    expect(received.at(-1)).toMatchObject({ seq: 2, type: "error", error: { kind: "internal", message: expect.stringMatching(/logprobs/) } });
    const events = await completionEvents(db.pool, job.completionId);
    expect(events).toHaveLength(1);
    expect(events[0]!.data).toMatchObject({ outcome: "failed", promptTokens: base.promptTokens, completionTokens: await engine.countTokens("Hello! I am") });
  });

  it("a stream whose delivered part cannot be read back whole ends with an error", async () => {
    const job = chatJob();
    await deadRun(job, [{ type: "started" }, { type: "delta", delta: { content: "Hello!" } }]);
    await testRedis.redis.xtrim(keys.replayStream(job.completionId), "MAXLEN", 1);
    const feed = subscriber.open(job.completionId);
    await runnerFor(chatModel).run(job, new AbortController().signal, "redelivered");
    const tail = await replayed(job);
    expect(tail.map((m) => [m.seq, m.type])).toEqual([
      [1, "delta"],
      [2, "error"],
    ]);
    feed.close();
  });

  it("an abandoned job (its workers died too often) ends with an error, charging what was delivered", async () => {
    const job = chatJob();
    const received = await runAgain(job, [{ type: "started" }, { type: "delta", delta: { content: "Hello!" } }], "abandoned");
    expect(seqs(received)).toEqual([0, 1, 2]);
    expect(received.at(-1)).toMatchObject({ type: "error", error: { message: expect.stringMatching(/too often/) } });
    expect((await completionEvents(db.pool, job.completionId))[0]!.data).toMatchObject({ outcome: "failed" });
  });

  it("a batch line's job abandoned, or failed by its engine, charges nothing; the line's next run is charged its whole reply, once", async () => {
    const base = await referenceUsage();
    const abandoned: CompletionJob = { ...chatJob(), lane: "batch" };
    const ended = await runAgain(abandoned, [{ type: "started" }, { type: "delta", delta: { content: "Hello!" } }], "abandoned");
    expect(ended.at(-1)).toMatchObject({ type: "error", error: { kind: "internal", message: expect.stringMatching(/too often/) } });
    expect(await completionEvents(db.pool, abandoned.completionId)).toHaveLength(0);

    // The dispatcher runs the line again under the same completion id, its replay stream discarded.
    await testRedis.redis.del(keys.replayStream(abandoned.completionId));
    const again = await runAgain(abandoned, [], "new");
    expect(text(again)).toBe(tiny.greedyReply);
    expect(again.at(-1)).toMatchObject({ type: "usage", usage: base });
    const charged = await completionEvents(db.pool, abandoned.completionId);
    expect(charged).toHaveLength(1);
    expect(charged[0]!.data).toMatchObject({ outcome: "finished", ...base, batchDiscountBps: chatModel.batchDiscountBps });

    // An engine failure after some of the reply: nothing charged either (an interactive job's is: see lostRequestCharge).
    const failing = new CompletionJobRunner({
      model: chatModel,
      engine: failingEngine(engine, 2),
      usage: new UsageRecorder(db.pool),
      publisherFor,
      replay: new ReplayReader(testRedis.redis, keys),
      now: () => new Date(),
      logger: silentLogger,
    });
    const failed: CompletionJob = { ...chatJob(), lane: "batch" };
    expect(await failing.run(failed, new AbortController().signal, "new")).toEqual({ promptTokens: 0, completionTokens: 0, reasoningTokens: 0 });
    expect((await replayed(failed)).at(-1)).toMatchObject({ type: "error", error: { kind: "internal" } });
    expect(await completionEvents(db.pool, failed.completionId)).toHaveLength(0);
    const interactive = chatJob();
    expect(await failing.run(interactive, new AbortController().signal, "new")).toMatchObject({ promptTokens: base.promptTokens });
    expect(await completionEvents(db.pool, interactive.completionId)).toHaveLength(1);
  });

  it("an embeddings job run again does not send its embeddings twice", async () => {
    const job: CompletionJob = { ...chatJob(), endpoint: "embeddings", model: TINY_EMBED, work: { kind: "embeddings", input: ["Hello there"] } };
    const received = await runAgain(job, [{ type: "started" }, { type: "embeddings", embeddings: [[0.5]] }]);
    expect(received.map((m) => m.type)).toEqual(["started", "embeddings", "usage"]);
    expect(consecutive(received)).toBe(true);
    expect((await replayed(job)).map((m) => [m.seq, m.type])).toEqual([
      [0, "started"],
      [1, "embeddings"],
      [2, "usage"],
    ]);
    expect(await completionEvents(db.pool, job.completionId)).toHaveLength(1);
  });
});
