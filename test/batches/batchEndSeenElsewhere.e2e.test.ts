import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BatchDispatcher } from "../../src/api/batches/batchDispatcher.ts";
import { pacedEngine } from "../inference/pacedEngine.ts";
import { TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";
import { createSameLinesBatch, readJsonl, waitForStatus, waitForRunningLines } from "./batchSteps.ts";
import { BatchTestPlatform } from "./batchTestPlatform.ts";

const LINES = 2;

/**
 * A batch cancelled while its lines run in one API process, whose cancel another process's dispatcher
 * sees first: that one stops the lines' jobs (EndingBatches), and the lines end `batch_cancelled` in the
 * error file, charged nothing (they ended as a 409 `completion_cancelled` of their jobs).
 */
describe("a batch's cancel seen first by another process's dispatcher", () => {
  let batches: BatchTestPlatform;
  let platform: TestPlatform;
  let other: BatchDispatcher;

  beforeAll(async () => {
    batches = await BatchTestPlatform.start({
      wrapEngine: (_model, engine) => pacedEngine(engine, 500),
      // The running lines' own dispatcher looks again only every few seconds: the other one goes first.
      env: { BATCH_POLL_MS: "4000", BATCH_MAX_IN_FLIGHT: String(LINES) },
    });
    platform = batches.platform;
    other = new BatchDispatcher(platform.deps, platform.inference, platform.deps.files!);
  }, 60_000);

  afterAll(async () => {
    await other?.stop();
    await batches?.close();
  });

  it("ends the running lines batch_cancelled", async () => {
    const { key } = await platform.createKey();
    const openai = platform.openai(key);
    const body = { model: TINY_CHAT, messages: [{ role: "user" as const, content: "Tell me a long story" }], max_tokens: 16, temperature: 0 };
    const { batchId } = await createSameLinesBatch(openai, body, LINES);
    await waitForRunningLines(platform.deps.pool, batchId, LINES);
    await openai.batches.cancel(batchId);
    await other.tick();
    const cancelled = await waitForStatus(openai, batchId, ["cancelled"], 30_000);
    const errors = await readJsonl(openai, cancelled.error_file_id!);
    expect(errors.map((e) => [e.error?.code, e.response])).toEqual(errors.map(() => ["batch_cancelled", null]));
  }, 60_000);
});
