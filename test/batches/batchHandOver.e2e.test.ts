import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { costMicroChf } from "../../src/ledger/pricing/costMicroChf.ts";
import { pacedEngine } from "../inference/pacedEngine.ts";
import { eventually } from "../support/eventually.ts";
import { TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";
import { batchCharges, expectEveryCustomIdOnce, readJsonl, uploadBatchFile, waitForStatus } from "./batchSteps.ts";
import { BatchTestPlatform } from "./batchTestPlatform.ts";

const LINES = 4;

/**
 * A batch whose dispatcher stops with lines running and is replaced only after the abandonment grace
 * period has passed (an API process that drains its interactive streams for longer than a short
 * COMPLETION_ABANDON_GRACE_MS): the lines' jobs are not "abandoned" (that is for interactive clients
 * who went away); the next dispatcher follows them to their end, each line done and charged once, whole.
 */
describe("batch lines handed over after the abandonment grace period", () => {
  let batches: BatchTestPlatform;
  let platform: TestPlatform;

  beforeAll(async () => {
    batches = await BatchTestPlatform.start({
      wrapEngine: (_model, engine) => pacedEngine(engine, 150),
      env: { BATCH_POLL_MS: "50", BATCH_MAX_IN_FLIGHT: String(LINES), COMPLETION_ABANDON_GRACE_MS: "200" },
    });
    platform = batches.platform;
  }, 60_000);

  afterAll(async () => {
    await batches?.close();
  });

  it("runs every line to its end, charged once at the batch price for its whole reply", async () => {
    const { key, account } = await platform.createKey();
    const openai = platform.openai(key);
    const body = { model: TINY_CHAT, messages: [{ role: "user" as const, content: "Say hello" }], max_tokens: 12, temperature: 0 };
    const lines = Array.from({ length: LINES }, (_, i) => ({ custom_id: `line-${i}`, method: "POST", url: "/v1/chat/completions", body }));
    const created = await openai.batches.create({
      input_file_id: await uploadBatchFile(openai, lines),
      endpoint: "/v1/chat/completions",
      completion_window: "24h",
    });
    // Every line's job generating (its first delta sent), then the dispatcher stops, for longer than the grace period.
    await eventually(async () => {
      const running = await platform.deps.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM batch_lines WHERE batch_id = $1 AND status = 'running'", [
        created.id,
      ]);
      return running.rows[0]!.n === LINES ? true : undefined;
    }, 30_000);
    await new Promise((resolve) => setTimeout(resolve, 400));
    await batches.stopDispatcher();
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    batches.restartDispatcher();

    const done = await waitForStatus(openai, created.id, ["completed", "failed", "expired"], 60_000);
    expect(done.request_counts).toEqual({ total: LINES, completed: LINES, failed: 0 });
    const reference = await openai.chat.completions.create(body);
    const output = await readJsonl(openai, done.output_file_id!);
    expectEveryCustomIdOnce(
      output,
      lines.map((l) => l.custom_id),
    );
    const model = platform.inference.registry.get(TINY_CHAT)!;
    const usage = { promptTokens: reference.usage!.prompt_tokens, completionTokens: reference.usage!.completion_tokens };
    const charges = await batchCharges(platform.deps.pool, account.accountId);
    for (const line of output) {
      expect(line.response.body.choices[0].message.content).toBe(reference.choices[0]!.message.content);
      const events = charges.get(`completion-${line.response.request_id}`)!;
      expect(events).toHaveLength(1);
      expect(events[0]!.costMicroChf).toBe(costMicroChf(usage, model, model.batchDiscountBps));
    }
  }, 120_000);
});
