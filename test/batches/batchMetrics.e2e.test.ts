import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pacedEngine } from "../inference/pacedEngine.ts";
import { eventually } from "../support/eventually.ts";
import { sampleValue, scrape } from "../support/prometheusText.ts";
import { TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";
import { BatchTestPlatform } from "./batchTestPlatform.ts";
import { chatLine, uploadBatchFile, waitForStatus } from "./batchSteps.ts";

/**
 * A batch's progress in /metrics (the API port's /metrics): its lines waiting and running per model
 * while the engine is slowed down (each delta 1.5 s), then, at full speed, every line ended and none open.
 */
describe("batch progress in /metrics", () => {
  let batches: BatchTestPlatform;
  let platform: TestPlatform;
  let paceMs = 1500;

  beforeAll(async () => {
    batches = await BatchTestPlatform.start({
      wrapEngine: (_model, engine) => pacedEngine(engine, () => paceMs),
      env: { METRICS_ON_API_PORT: "true", BATCH_POLL_MS: "50", BATCH_MAX_IN_FLIGHT: "4" },
    });
    platform = batches.platform;
  }, 60_000);

  afterAll(async () => {
    await batches?.close();
  });

  it("shows lines waiting and running per model, then the lines ended by model and outcome", async () => {
    const { key } = await platform.createKey();
    const openai = platform.openai(key);
    const lines = Array.from({ length: 10 }, (_, i) => chatLine(i, TINY_CHAT));
    const inputFileId = await uploadBatchFile(openai, lines);
    const batch = await openai.batches.create({ input_file_id: inputFileId, endpoint: "/v1/chat/completions", completion_window: "24h" });
    await waitForStatus(openai, batch.id, ["in_progress"]);

    // A slow engine: the ten lines are open, some claimed (running), the rest waiting.
    const open = await eventually(async () => {
      const { samples } = await scrape(`${platform.baseUrl}/metrics`);
      const waiting = sampleValue(samples, "batch_lines", { model: TINY_CHAT, state: "waiting" }) ?? 0;
      const running = sampleValue(samples, "batch_lines", { model: TINY_CHAT, state: "running" }) ?? 0;
      return running > 0 && waiting + running === 10 ? { waiting, running, samples } : undefined;
    }, 30_000);
    expect(open.running).toBeLessThanOrEqual(4);
    expect(sampleValue(open.samples, "batch_lines_ended_total", { model: TINY_CHAT }) ?? 0).toBeLessThan(10);

    paceMs = 0;
    const done = await waitForStatus(openai, batch.id, ["completed", "failed"], 90_000);
    expect(done.request_counts).toEqual({ total: 10, completed: 10, failed: 0 });
    const { samples } = await scrape(`${platform.baseUrl}/metrics`);
    expect(sampleValue(samples, "batch_lines_ended_total", { model: TINY_CHAT, outcome: "done" })).toBe(10);
    expect(sampleValue(samples, "batch_lines", { model: TINY_CHAT })).toBeUndefined();
  }, 150_000);

  it("counts the lines a cancel ends: not started as cancelled, stopped while running as failed", async () => {
    paceMs = 1500;
    const { key } = await platform.createKey();
    const openai = platform.openai(key);
    const lines = Array.from({ length: 8 }, (_, i) => chatLine(i, TINY_CHAT));
    const inputFileId = await uploadBatchFile(openai, lines);
    const batch = await openai.batches.create({ input_file_id: inputFileId, endpoint: "/v1/chat/completions", completion_window: "24h" });
    await waitForStatus(openai, batch.id, ["in_progress"]);
    await openai.batches.cancel(batch.id);
    const cancelled = await waitForStatus(openai, batch.id, ["cancelled"], 90_000);
    const { samples } = await scrape(`${platform.baseUrl}/metrics`);
    // Lines not started end as cancelled; lines stopped while running end as failed (their error body).
    const notStarted = sampleValue(samples, "batch_lines_ended_total", { model: TINY_CHAT, outcome: "cancelled" }) ?? 0;
    const stopped = sampleValue(samples, "batch_lines_ended_total", { model: TINY_CHAT, outcome: "failed" }) ?? 0;
    expect(notStarted).toBeGreaterThan(0);
    expect(notStarted + stopped).toBe(cancelled.request_counts!.failed);
    expect(sampleValue(samples, "batch_lines_ended_total", { model: TINY_CHAT, outcome: "done" })).toBe(10 + cancelled.request_counts!.completed);
  }, 150_000);

  it("labels the lines of models the registry does not have as unknown, whatever their names", async () => {
    paceMs = 1500;
    const { key } = await platform.createKey();
    const openai = platform.openai(key);
    // Four slow lines take the dispatcher's four places; the lines naming unknown models wait behind them.
    const strange = ["bm-one", "bm-two", `bm-${"x".repeat(3000)}`];
    const lines = [...Array.from({ length: 4 }, (_, i) => chatLine(i, TINY_CHAT)), ...strange.map((model, i) => chatLine(4 + i, model))];
    const inputFileId = await uploadBatchFile(openai, lines);
    const batch = await openai.batches.create({ input_file_id: inputFileId, endpoint: "/v1/chat/completions", completion_window: "24h" });
    await waitForStatus(openai, batch.id, ["in_progress"]);
    const open = await eventually(async () => {
      const { samples } = await scrape(`${platform.baseUrl}/metrics`);
      return sampleValue(samples, "batch_lines", { model: "unknown", state: "waiting" }) === 3 ? samples : undefined;
    }, 30_000);
    expect(JSON.stringify(open)).not.toContain("bm-");

    paceMs = 0;
    const done = await waitForStatus(openai, batch.id, ["completed", "failed"], 90_000);
    expect(done.request_counts?.failed).toBe(3);
    const { samples } = await scrape(`${platform.baseUrl}/metrics`);
    expect(sampleValue(samples, "batch_lines_ended_total", { model: "unknown", outcome: "failed" })).toBe(3);
    expect(JSON.stringify(samples)).not.toContain("bm-");
  }, 150_000);
});
