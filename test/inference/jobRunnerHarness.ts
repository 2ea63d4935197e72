import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DeltaSubscriber } from "../../src/api/inference/jobs/deltaSubscriber.ts";
import type { CompletionJob } from "../../src/contracts/completionJob.ts";
import { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import { ModelRegistry } from "../../src/models/modelRegistry.ts";
import { createRedis } from "../../src/redis/createRedis.ts";
import { type TinyModelInfo, writeTinyModel } from "../../tools/gguf/tinyModel.ts";
import { CoalescingWindow } from "../../workers/completion/coalescingWindow.ts";
import { DeltaPublisher } from "../../workers/completion/deltaPublisher.ts";
import { TurnWriter } from "../../workers/completion/turnWriter.ts";
import { createLlama } from "../../workers/engines/embedded/createLlama.ts";
import { EmbeddedEngine } from "../../workers/engines/embedded/embeddedEngine.ts";
import type { ChatRequest } from "../../workers/engines/engine.ts";
import { createTestDatabase, type TestDatabase } from "../support/testDatabase.ts";
import { createTestRedis, TEST_REDIS_URL, type TestRedis } from "../support/testRedis.ts";
import { TINY_CHAT, tinyModelEntries } from "../support/testPlatform.ts";
import { createBudgetedAccount } from "../usage/usageFixtures.ts";

/**
 * What a test of CompletionJobRunner runs against: a fresh database with a budgeted account, real Redis
 * (a unique key prefix), the API's DeltaSubscriber, a worker's own Redis connection and the tiny
 * embedded model.
 */
export type JobRunnerHarness = {
  db: TestDatabase;
  testRedis: TestRedis;
  keys: InferenceKeys;
  subscriber: DeltaSubscriber;
  tiny: TinyModelInfo;
  engine: EmbeddedEngine;
  registry: ModelRegistry;
  accountId: string;
  /** A worker's publisher for the job, numbering from firstSeq; no coalescing: every delta is a message of its own. */
  publisherFor: (job: { completionId: string; replyTo: string }, firstSeq: number, fence?: { run?: number; onSuperseded?: () => void }) => DeltaPublisher;
  /** A new chat job of the account on the tiny chat model, its replies sent to the subscriber. */
  chatJob: (request: ChatRequest) => CompletionJob;
  close: () => Promise<void>;
};

/** Starts the harness (the tiny model's file in a temporary directory named from `dirPrefix`); close() releases all of it. */
export async function startJobRunnerHarness(dirPrefix: string): Promise<JobRunnerHarness> {
  const closers: (() => unknown)[] = [];
  const close = async () => {
    for (const closer of closers.splice(0).reverse()) await closer();
  };
  try {
    const db = await createTestDatabase();
    closers.push(() => db.drop());
    const testRedis = await createTestRedis();
    closers.push(() => testRedis.close());
    const writerRedis = createRedis(TEST_REDIS_URL, { kind: "worker" });
    closers.push(() => writerRedis.disconnect());
    const keys = new InferenceKeys(testRedis.prefix);
    const subscriber = new DeltaSubscriber(testRedis.redis, keys);
    closers.push(() => subscriber.close());
    await subscriber.ready;
    const dir = await mkdtemp(join(tmpdir(), dirPrefix));
    closers.push(() => rm(dir, { recursive: true, force: true }));
    const tiny = await writeTinyModel(join(dir, "tiny.gguf"));
    const engine = await EmbeddedEngine.load(
      { modelPath: tiny.path, threads: 1, contextSize: 1024, maxConcurrency: 2 },
      { llama: await createLlama({ gpu: false }) },
    );
    closers.push(() => engine.close());
    const registry = new ModelRegistry("test-1", tinyModelEntries(tiny.path));
    const accountId = await createBudgetedAccount(db.pool, 10_000_000_000);
    return {
      db,
      testRedis,
      keys,
      subscriber,
      tiny,
      engine,
      registry,
      accountId,
      publisherFor: (job, firstSeq, fence) =>
        new DeltaPublisher(keys, job, {
          window: new CoalescingWindow(0),
          writer: new TurnWriter(writerRedis),
          replayTtlSeconds: 60,
          replayMaxLen: 1000,
          firstSeq,
          ...fence,
        }),
      chatJob: (request) => ({
        completionId: `chatcmpl-${randomUUID().replaceAll("-", "")}`,
        endpoint: "chat.completions",
        model: TINY_CHAT,
        accountId,
        keyId: randomUUID(),
        created: 1,
        replyTo: subscriber.replyTo,
        work: { kind: "chat", request },
      }),
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}
