import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pacedEngine } from "../inference/pacedEngine.ts";
import { TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";
import { batchCharges, createSameLinesBatch, waitForStatus, waitForRunningLines } from "./batchSteps.ts";
import { BatchTestPlatform } from "./batchTestPlatform.ts";

const LINES = 2;

/**
 * A batch cancelled while its running lines' dispatcher is gone (its process killed: their leases still
 * run) and their jobs still generate: the next dispatcher's round stops the jobs at once, charging
 * nothing, and the lines end cancelled (a probe saw them run to their end, charged, while their leases
 * ran out).
 */
describe("a batch cancelled while its running lines' dispatcher is gone", () => {
  let batches: BatchTestPlatform;
  let platform: TestPlatform;

  beforeAll(async () => {
    batches = await BatchTestPlatform.start({
      wrapEngine: (_model, engine) => pacedEngine(engine, 500),
      env: { BATCH_POLL_MS: "50", BATCH_MAX_IN_FLIGHT: String(LINES), BATCH_LINE_LEASE_MS: "8000" },
    });
    platform = batches.platform;
  }, 60_000);

  afterAll(async () => {
    await batches?.close();
  });

  it("stops the lines' jobs at once: cancelled, nothing charged", async () => {
    const { key, account } = await platform.createKey();
    const openai = platform.openai(key);
    const body = { model: TINY_CHAT, messages: [{ role: "user" as const, content: "Tell me a long story" }], max_tokens: 16, temperature: 0 };
    const { batchId } = await createSameLinesBatch(openai, body, LINES);
    await waitForRunningLines(platform.deps.pool, batchId, LINES);
    await batches.stopDispatcher();
    // As when its process was killed: the leases still run (a graceful stop hands them over at once).
    await platform.deps.pool.query("UPDATE batch_lines SET claimed_until = now() + interval '8 seconds' WHERE batch_id = $1 AND status = 'running'", [batchId]);
    expect((await openai.batches.cancel(batchId)).status).toBe("cancelling");
    batches.restartDispatcher();
    const done = await waitForStatus(openai, batchId, ["cancelled"], 30_000);
    expect(done.request_counts).toEqual({ total: LINES, completed: 0, failed: LINES });
    expect((await batchCharges(platform.deps.pool, account.accountId)).size).toBe(0);
  }, 60_000);
});
