import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import { costMicroChf } from "../../src/ledger/pricing/costMicroChf.ts";
import { batchCharges, expectEveryCustomIdOnce, readJsonl, uploadBatchFile, waitForStatus } from "../batches/batchSteps.ts";
import { eventually } from "../support/eventually.ts";
import { freePort } from "../support/freePort.ts";
import { createTestAccount, type TestAccount } from "../support/testAccounts.ts";
import { createTestDatabase, type TestDatabase } from "../support/testDatabase.ts";
import { createTestRedis, TEST_REDIS_URL, type TestRedis } from "../support/testRedis.ts";
import { countingReply, type CountingUpstream, startCountingUpstream, countingModel } from "./countingUpstream.ts";

/**
 * A batch through a worker killed with SIGKILL and its API process killed with SIGKILL in the middle of
 * the batch, every role its own OS process (the production entry points): a second API process and a
 * second worker take over. Every line is in the output file once, charged once (one UsageRecorded per
 * line, at the batch discount), and the usage API counts as many requests as lines completed.
 */
const API_MAIN = fileURLToPath(new URL("../../src/api/main.ts", import.meta.url));
const WORKER_MAIN = fileURLToPath(new URL("../../workers/main.ts", import.meta.url));
const PROJECTOR_MAIN = fileURLToPath(new URL("../../projections/main.ts", import.meta.url));
const MODEL = "counting-model";
const TOKENS = 8;
const PROMPT_TOKENS = 20;
const LINES = 40;

let db: TestDatabase;
let redis: TestRedis;
let upstream: CountingUpstream;
let dir: string;
let env: Record<string, string>;
let account: TestAccount;
const children: ChildProcess[] = [];
const logs: string[] = [];

beforeAll(async () => {
  db = await createTestDatabase();
  redis = await createTestRedis();
  upstream = await startCountingUpstream({ totalTokens: TOKENS, tokenDelayMs: 40, promptTokens: PROMPT_TOKENS });
  dir = await mkdtemp(path.join(tmpdir(), "batch-crash-"));
  const model = countingModel(upstream, { id: MODEL, maxConcurrency: 4, continueFinalMessage: true });
  const registry = path.join(dir, "registry.json");
  await writeFile(registry, JSON.stringify({ price_table_version: "test-1", models: [model] }));
  env = {
    PATH: process.env.PATH ?? "",
    DATABASE_URL: db.url,
    REDIS_URL: TEST_REDIS_URL,
    REDIS_PREFIX: redis.prefix,
    MODELS_CONFIG: registry,
    WORKER_HEARTBEAT_MS: "500",
    WORKER_LOCK_MS: "2000",
    WORKER_STALLED_CHECK_MS: "500",
    PROJECTOR_POLL_MS: "20",
    BATCH_POLL_MS: "100",
    BATCH_MAX_IN_FLIGHT: "8",
    BATCH_LINE_LEASE_MS: "2000",
    LOG_LEVEL: "warn",
  };
  spawnRole(PROJECTOR_MAIN, env);
  account = await createTestAccount(db.pool, { monthlyBudgetChf: 100 });
}, 120_000);

afterAll(async () => {
  await Promise.all(children.map(stopChild));
  await upstream?.close();
  await redis?.close();
  await db?.drop();
  if (dir) await rm(dir, { recursive: true, force: true });
}, 60_000);

describe("a batch through a worker and an API process killed with SIGKILL", () => {
  it(`runs each of ${LINES} lines once, charges each once at the batch price, and the usage API counts them`, async () => {
    const first = await startApi();
    const firstWorker = spawnRole(WORKER_MAIN, env);
    await workersLive(1);
    const key = await createKey(first.url);
    const openai = new OpenAI({ baseURL: `${first.url}/v1`, apiKey: key, maxRetries: 0 });
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
    // Mid-batch: some lines done, others running in the worker for this API process.
    await eventually(async () => {
      const counts = (await openai.batches.retrieve(created.id)).request_counts!;
      return counts.completed >= 6 ? counts : undefined;
    }, 60_000).catch(async (error: unknown) => {
      const state = await db.pool.query("SELECT status, errors, completed_lines, failed_lines FROM batches WHERE id = $1", [created.id]);
      const lineStates = await db.pool.query("SELECT status, attempts, error FROM batch_lines WHERE batch_id = $1 LIMIT 3", [created.id]);
      throw new Error(`the batch did not get under way: ${JSON.stringify([state.rows, lineStates.rows, upstream.requests.length])} ${logs.join("")}`, {
        cause: error,
      });
    });
    const running = await db.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM batch_lines WHERE batch_id = $1 AND status = 'running'", [created.id]);
    expect(running.rows[0]!.n).toBeGreaterThan(0);
    const requestsAtKill = upstream.requests.length;
    firstWorker.kill("SIGKILL");
    first.process.kill("SIGKILL");
    await Promise.all([exited(firstWorker), exited(first.process)]);
    const midway = await db.pool.query<{ completed: number }>("SELECT completed_lines AS completed FROM batches WHERE id = $1", [created.id]);
    expect(midway.rows[0]!.completed).toBeLessThan(LINES);

    const second = await startApi();
    spawnRole(WORKER_MAIN, env);
    await workersLive(1);
    const again = new OpenAI({ baseURL: `${second.url}/v1`, apiKey: key, maxRetries: 0 });
    const done = await waitForStatus(again, created.id, ["completed", "failed", "expired"], 90_000).catch(async (error: unknown) => {
      const lineStates = await db.pool.query(
        "SELECT status, attempts, claimed_until > now() AS claimed, not_before, error, count(*) FROM batch_lines WHERE batch_id = $1 GROUP BY 1, 2, 3, 4, 5",
        [created.id],
      );
      throw new Error(
        `the batch did not complete: upstream ${requestsAtKill} -> ${upstream.requests.length} ${JSON.stringify(upstream.requests.filter((r) => r.continued))} ${JSON.stringify(lineStates.rows.filter((r) => r.status === "running"))} ${logs.join("")}`,
        { cause: error },
      );
    });
    expect(done.status).toBe("completed");
    expect(done.request_counts).toEqual({ total: LINES, completed: LINES, failed: 0 });
    const output = await readJsonl(again, done.output_file_id!);
    expectEveryCustomIdOnce(
      output,
      lines.map((l) => l.custom_id),
    );
    for (const line of output) {
      expect(line.response.status_code).toBe(200);
      expect(line.response.body.choices[0].message.content).toBe(countingReply(TOKENS));
      expect(line.response.body.usage.completion_tokens).toBe(TOKENS);
    }

    const cost = costMicroChf(
      { promptTokens: PROMPT_TOKENS, completionTokens: TOKENS },
      { inputMicroChfPerMillion: 1_000_000, outputMicroChfPerMillion: 2_000_000 },
      5000,
    );
    // Charged once each, at the batch discount (half price), and nothing else charged. A line whose
    // speculative hold was lost with the killed API process is charged once its admission's decision
    // time has passed (ADMISSION_DECIDED_WITHIN_MS after its run started): waited for here.
    const charges = await eventually(async () => {
      const found = await batchCharges(db.pool, account.accountId);
      return found.size >= LINES ? found : undefined;
    }, 45_000).catch(async (error: unknown) => {
      const found = await batchCharges(db.pool, account.accountId);
      throw new Error(`${found.size} of ${LINES} lines charged: ${JSON.stringify(upstream.requests.map((r) => r.continuedFrom))}\n${logs.join("")}`, {
        cause: error,
      });
    });
    const usages = await db.pool.query<{ stream_id: string; data: { costMicroChf: number } }>(
      "SELECT stream_id, data FROM es_events WHERE event_type = 'UsageRecorded' AND data->>'accountId' = $1",
      [account.accountId],
    );
    const off = usages.rows.filter((r) => r.data.costMicroChf !== cost);
    if (off.length > 0) throw new Error(`charged other than ${cost} µCHF: ${JSON.stringify(off)}\n${logs.join("")}`);
    expect(charges.size).toBe(LINES);
    for (const line of output) {
      const events = charges.get(`completion-${line.response.request_id}`)!;
      expect(events).toHaveLength(1);
      expect(events[0]!.batchDiscountBps).toBe(5000);
      expect(events[0]!.costMicroChf).toBe(cost);
    }
    const all = await db.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM es_events WHERE event_type = 'UsageRecorded' AND data->>'accountId' = $1", [
      account.accountId,
    ]);
    expect(all.rows[0]!.n).toBe(LINES);

    // The usage API (a session) counts as many requests as completed lines, at their cost.
    const usage = await eventually(async () => {
      const response = await fetch(`${second.url}/api/v1/accounts/user/usage?group_by=model`, { headers: { authorization: `Bearer ${account.sessionToken}` } });
      const body = (await response.json()) as { total: { requests: number; cost_chf: number } };
      return body.total?.requests === LINES ? body : undefined;
    }, 30_000);
    expect(usage.total.requests).toBe(done.request_counts!.completed);
    expect(usage.total.cost_chf).toBeCloseTo((cost * LINES) / 1_000_000, 6);
  }, 240_000);
});

/** `n` workers beat for the model (a killed one's beat ends within a second). */
async function workersLive(n: number): Promise<void> {
  const presence = new InferenceKeys(redis.prefix).modelWorkers(MODEL);
  await eventually(async () => ((await redis.redis.zcount(presence, Date.now(), "+inf")) === n ? true : undefined), 60_000).catch((error: unknown) => {
    throw new Error(`the workers did not start: ${logs.join("")}`, { cause: error });
  });
}

async function startApi(): Promise<{ url: string; process: ChildProcess }> {
  const port = await freePort();
  const child = spawnRole(API_MAIN, { ...env, PORT: String(port), HOST: "127.0.0.1" });
  const url = `http://127.0.0.1:${port}`;
  await eventually(async () => ((await fetch(`${url}/v1/models`).catch(() => null))?.status === 403 ? true : undefined), 60_000).catch((error: unknown) => {
    throw new Error(`the API at ${url} did not start: ${logs.join("")}`, { cause: error });
  });
  return { url, process: child };
}

async function createKey(api: string): Promise<string> {
  const response = await fetch(`${api}/api/v1/accounts/user/api-keys/create`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${account.sessionToken}` },
    body: JSON.stringify({ name: "batch key" }),
  });
  const body = (await response.json()) as { key: string };
  expect(response.status).toBe(201);
  return body.key;
}

function spawnRole(main: string, roleEnv: Record<string, string>): ChildProcess {
  const child = spawn(process.execPath, [main], { env: roleEnv, stdio: ["ignore", "pipe", "pipe"] });
  children.push(child);
  child.stdout?.setEncoding("utf8").on("data", (text: string) => logs.push(`${path.basename(path.dirname(main))}: ${text}`));
  child.stderr?.setEncoding("utf8").on("data", (text: string) => logs.push(`${path.basename(path.dirname(main))}: ${text}`));
  return child;
}

function exited(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve() : child.once("exit", () => resolve())));
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exit = exited(child);
  child.kill("SIGKILL");
  await exit;
}
