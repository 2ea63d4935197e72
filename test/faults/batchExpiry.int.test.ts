import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BatchDispatcher } from "../../src/api/batches/batchDispatcher.ts";
import { type CountingUpstream, startCountingUpstream, countingModel } from "./countingUpstream.ts";
import { startTestPlatform, type TestPlatform } from "../support/testPlatform.ts";
import { readJsonl, uploadBatchFile, waitForStatus } from "../batches/batchSteps.ts";

/**
 * The end of a batch's completion window: lines not done are expired (the error file, `batch_expired`)
 * and charged nothing, those still generating included (their jobs are stopped with the cancel of reason
 * `expired`, which records nothing); lines done before it are in the output file, charged once each, what
 * their output's usage shows. A paced upstream (2 slots, each reply several seconds long) and a window
 * of a few seconds put some lines mid-generation when the window ends.
 */
const MODEL = "paced-model";
const TOKENS = 10;
const LINES = 6;

let upstream: CountingUpstream;
let platform: TestPlatform;
let dispatcher: BatchDispatcher | null = null;

beforeAll(async () => {
  upstream = await startCountingUpstream({ totalTokens: TOKENS, tokenDelayMs: 300, promptTokens: 20 });
  const model = countingModel(upstream, { id: MODEL, maxConcurrency: 2, continueFinalMessage: true });
  platform = await startTestPlatform({
    models: () => [model],
    env: { BATCH_POLL_MS: "50", BATCH_MAX_IN_FLIGHT: "4", BATCH_COMPLETION_WINDOW_MS: "5000" },
  });
}, 60_000);

afterAll(async () => {
  await dispatcher?.stop();
  await platform?.close();
  await upstream?.close();
});

describe("a batch whose completion window ends", () => {
  it("expires the lines not done, those mid-generation included, charging them nothing; the lines done are charged once", async () => {
    const { key, account } = await platform.createKey();
    const openai = platform.openai(key);
    const lines = Array.from({ length: LINES }, (_, i) => ({
      custom_id: `line-${i}`,
      method: "POST",
      url: "/v1/chat/completions",
      body: { model: MODEL, messages: [{ role: "user", content: `Count, line ${i}.` }], max_tokens: TOKENS + 100, temperature: 0 },
    }));
    const created = await openai.batches.create({
      input_file_id: await uploadBatchFile(openai, lines),
      endpoint: "/v1/chat/completions",
      completion_window: "24h",
    });
    dispatcher = new BatchDispatcher(platform.deps, platform.inference, platform.deps.files!);
    dispatcher.start();
    const done = await waitForStatus(openai, created.id, ["expired", "completed", "failed"], 60_000);
    expect(done.status).toBe("expired");
    // A stopped job would be charged right after its cancel: give it the length of a whole reply to show.
    await new Promise((resolve) => setTimeout(resolve, TOKENS * 300));

    const output = done.output_file_id ? await readJsonl(openai, done.output_file_id) : [];
    const errors = done.error_file_id ? await readJsonl(openai, done.error_file_id) : [];
    expect(output.length + errors.length).toBe(LINES);
    expect(done.request_counts).toEqual({ total: LINES, completed: output.length, failed: errors.length });
    for (const line of errors) expect(line.error.code).toBe("batch_expired");
    expect(output.length).toBeGreaterThan(0);
    expect(errors.length).toBeGreaterThan(0);
    // Some expired lines were mid-generation when the window ended (their upstream requests were made).
    expect(upstream.requests.length).toBeGreaterThan(output.length);

    const rows = await platform.deps.pool.query<{ custom_id: string; completion_id: string }>(
      "SELECT custom_id, completion_id FROM batch_lines WHERE batch_id = $1",
      [created.id],
    );
    const completionOf = new Map(rows.rows.map((r) => [r.custom_id, r.completion_id]));
    const usage = await platform.deps.pool.query<{ stream_id: string; data: { promptTokens: number; completionTokens: number } }>(
      "SELECT stream_id, data FROM es_events WHERE event_type = 'UsageRecorded' AND data->>'accountId' = $1",
      [account.accountId],
    );
    const charged = new Map<string, { promptTokens: number; completionTokens: number }[]>();
    for (const row of usage.rows) charged.set(row.stream_id, [...(charged.get(row.stream_id) ?? []), row.data]);
    // Nothing charged but the lines done, each once, what its output shows.
    expect(usage.rows).toHaveLength(output.length);
    for (const line of output) {
      const events = charged.get(`completion-${completionOf.get(line.custom_id)}`) ?? [];
      expect(events).toHaveLength(1);
      expect({ prompt: events[0]!.promptTokens, completion: events[0]!.completionTokens }).toEqual({
        prompt: line.response.body.usage.prompt_tokens,
        completion: line.response.body.usage.completion_tokens,
      });
    }
    for (const line of errors) expect(charged.get(`completion-${completionOf.get(line.custom_id)}`)).toBeUndefined();
  }, 120_000);
});
