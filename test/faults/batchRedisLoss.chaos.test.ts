import { type ChildProcess, spawn } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BatchDispatcher } from "../../src/api/batches/batchDispatcher.ts";
import { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import { WorkerPresence } from "../../src/contracts/workerPresence.ts";
import { batchCharges, expectEveryCustomIdOnce, readJsonl, uploadBatchFile, waitForStatus } from "../batches/batchSteps.ts";
import { eventually } from "../support/eventually.ts";
import { type RedisServer, startRedisServer } from "../support/redisServer.ts";
import { startTestPlatform, type TestPlatform } from "../support/testPlatform.ts";
import { countingReply, type CountingUpstream, startCountingUpstream, countingModel } from "./countingUpstream.ts";

/**
 * A batch whose queue entries and job messages are lost with Redis: a private redis-server stopped with
 * SHUTDOWN NOSAVE mid-batch and started again empty, with more lines in flight than the model has slots
 * and a short start timeout (the lines' jobs stay in line past it, followed from their replay streams).
 * The dispatcher finds each lost entry again (its job neither ended nor in BullMQ) and enqueues it under
 * the same completion id; a platform-side failure is never a line's error: every line ends in the output
 * file once and is charged once, what its output's usage shows. The idle timeout is far beyond the test's
 * bound, so a line left following a job that no longer exists shows as a hang.
 */
const WORKER_MAIN = fileURLToPath(new URL("../../workers/main.ts", import.meta.url));
const MODEL = "counting-model";
const TOKENS = 8;
const LINES = 20;

let redis: RedisServer;
let upstream: CountingUpstream;
let platform: TestPlatform;
let dispatcher: BatchDispatcher | null = null;
let worker: ChildProcess | null = null;
const logs: string[] = [];

beforeAll(async () => {
  upstream = await startCountingUpstream({ totalTokens: TOKENS, tokenDelayMs: 200, promptTokens: 20 });
  const model = countingModel(upstream, { id: MODEL, maxConcurrency: 4, continueFinalMessage: true });
  redis = await startRedisServer();
  platform = await startTestPlatform({
    redisUrl: redis.url,
    models: () => [model],
    startWorker: false,
    env: { BATCH_POLL_MS: "50", BATCH_MAX_IN_FLIGHT: "8", JOB_START_TIMEOUT_MS: "1200", JOB_IDLE_TIMEOUT_MS: "300000" },
  });
  worker = spawn(process.execPath, [WORKER_MAIN], {
    env: {
      PATH: process.env.PATH,
      DATABASE_URL: platform.db.url,
      REDIS_URL: redis.url,
      REDIS_PREFIX: platform.deps.config.redisPrefix,
      MODELS_CONFIG: path.join(platform.dir, "registry.json"),
      WORKER_HEARTBEAT_MS: "500",
      LOG_LEVEL: "error",
    },
    stdio: ["ignore", "ignore", "pipe"],
  });
  worker.stderr?.setEncoding("utf8").on("data", (text: string) => logs.push(text));
  const presence = new WorkerPresence(platform.deps.redis, new InferenceKeys(platform.deps.config.redisPrefix));
  await eventually(async () => ((await presence.isLive(MODEL)) ? true : undefined), 30_000);
}, 120_000);

afterAll(async () => {
  await dispatcher?.stop();
  if (worker && worker.exitCode === null && worker.signalCode === null) {
    const running = worker;
    const exited = new Promise<void>((resolve) => running.once("exit", () => resolve()));
    running.kill("SIGKILL");
    await exited;
  }
  await platform?.close();
  await redis?.stop();
  await upstream?.close();
}, 60_000);

describe("a batch through a loss of Redis", () => {
  it(`ends each of ${LINES} lines once, charged once, when Redis is lost mid-batch and jobs wait in line past the start timeout`, async () => {
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
    // The dispatcher's warnings (a line run again, and why) are shown when the batch does not complete.
    const warn = (message: string, fields?: Record<string, unknown>) =>
      logs.push(`${message} ${JSON.stringify(fields, (_, v: unknown) => (v instanceof Error ? `${v.name}: ${v.message}` : v))}\n`);
    const logger = { ...platform.deps.logger, warn, error: warn };
    dispatcher = new BatchDispatcher({ ...platform.deps, logger }, platform.inference, platform.deps.files!);
    dispatcher.start();
    await eventually(async () => {
      const done = await platform.deps.pool.query<{ n: number }>("SELECT completed_lines AS n FROM batches WHERE id = $1", [created.id]);
      return done.rows[0]!.n >= 3 ? true : undefined;
    }, 60_000);
    const running = await platform.deps.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM batch_lines WHERE batch_id = $1 AND status = 'running'", [
      created.id,
    ]);
    expect(running.rows[0]!.n).toBeGreaterThan(0);
    await redis.shutdownNosave();
    await new Promise((resolve) => setTimeout(resolve, 1000));
    await redis.start();

    const done = await waitForStatus(openai, created.id, ["completed", "failed", "expired"], 120_000).catch(async (error: unknown) => {
      const states = await platform.deps.pool.query("SELECT status, attempts, count(*)::int AS n FROM batch_lines WHERE batch_id = $1 GROUP BY 1, 2", [
        created.id,
      ]);
      throw new Error(`the batch did not complete: ${JSON.stringify(states.rows)} ${logs.join("")}`, { cause: error });
    });
    expect(done.status).toBe("completed");
    const errors = done.error_file_id ? await readJsonl(openai, done.error_file_id) : [];
    expect(errors).toEqual([]);
    expect(done.request_counts).toEqual({ total: LINES, completed: LINES, failed: 0 });
    const output = await readJsonl(openai, done.output_file_id!);
    expectEveryCustomIdOnce(
      output,
      lines.map((l) => l.custom_id),
    );
    for (const line of output) expect(line.response.body.choices[0].message.content).toBe(countingReply(TOKENS));
    // Charged once each (one UsageRecorded per line, at the batch discount), and nothing else.
    const charges = await batchCharges(platform.deps.pool, account.accountId);
    expect(charges.size).toBe(LINES);
    for (const line of output) {
      const events = charges.get(`completion-${line.response.request_id}`)!;
      expect(events).toHaveLength(1);
      expect(events[0]!.batchDiscountBps).toBe(5000);
      // The charge is what the output holds (a line whose first run was lost is not charged a partial run).
      const charged = events[0] as unknown as { promptTokens: number; completionTokens: number };
      expect({ prompt_tokens: charged.promptTokens, completion_tokens: charged.completionTokens }).toEqual({
        prompt_tokens: line.response.body.usage.prompt_tokens,
        completion_tokens: line.response.body.usage.completion_tokens,
      });
    }
    const all = await platform.deps.pool.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM es_events WHERE event_type = 'UsageRecorded' AND data->>'accountId' = $1",
      [account.accountId],
    );
    expect(all.rows[0]!.n).toBe(LINES);
    expect(worker!.exitCode, logs.join("")).toBeNull();
  }, 240_000);
});
