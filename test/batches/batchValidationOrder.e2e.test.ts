import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { validateNextBatch } from "../../src/api/batches/validateBatch.ts";
import { startTestPlatform, TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";
import { chatLine, uploadBatchFile } from "./batchSteps.ts";

/** The order batches are validated in: every account's oldest first, whatever attempts an interruption left. */
describe("batch validation order", () => {
  let platform: TestPlatform;
  beforeAll(async () => {
    platform = await startTestPlatform({ startWorker: false });
  }, 60_000);
  afterAll(async () => {
    await platform?.close();
  });

  it("validates another account's only batch, once interrupted, before the second of an account with many", async () => {
    const busy = platform.openai((await platform.createKey()).key);
    const file = await uploadBatchFile(busy, [chatLine(1, TINY_CHAT)]);
    for (let i = 0; i < 5; i++) await busy.batches.create({ input_file_id: file, endpoint: "/v1/chat/completions", completion_window: "24h" });
    const other = platform.openai((await platform.createKey()).key);
    const waiting = await other.batches.create({
      input_file_id: await uploadBatchFile(other, [chatLine(1, TINY_CHAT)]),
      endpoint: "/v1/chat/completions",
      completion_window: "24h",
    });
    // Its first attempt was interrupted (a restart): counted, rolled back.
    await platform.deps.pool.query("UPDATE batches SET validation_attempts = 1 WHERE id = $1", [waiting.id]);
    const now = () => new Date();
    expect(await validateNextBatch(platform.deps.pool, platform.deps.files!, now)).toBe(true);
    expect(await validateNextBatch(platform.deps.pool, platform.deps.files!, now)).toBe(true);
    const status = await platform.deps.pool.query<{ status: string }>("SELECT status FROM batches WHERE id = $1", [waiting.id]);
    expect(status.rows[0]!.status).toBe("in_progress");
  }, 60_000);
});
