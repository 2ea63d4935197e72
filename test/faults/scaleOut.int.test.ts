import { freePort } from "../support/freePort.ts";
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import type { UsageRecordedData } from "../../src/ledger/usageRecordedEvent.ts";
import { createKey } from "../keys/keySteps.ts";
import { completionEvents } from "../inference/inferenceSteps.ts";
import { expectedUsage, liveUsage } from "../projections/usageExpectations.ts";
import { eventually } from "../support/eventually.ts";
import { createTestAccount, type TestAccount } from "../support/testAccounts.ts";
import { createTestDatabase, type TestDatabase } from "../support/testDatabase.ts";
import { createTestRedis, TEST_REDIS_URL, type TestRedis } from "../support/testRedis.ts";
import { countingReply, type CountingUpstream, startCountingUpstream, countingModel } from "./countingUpstream.ts";
import { type ChatResult, chatThrough, requestVia } from "./processChat.ts";

/**
 * Scale-out on one database and one Redis: two API processes, two workers and two projectors, each its
 * own OS process (the production entry points), serving a stand-in upstream model. Requests sent to
 * both APIs at once are each answered once and charged once, and the projected usage agrees.
 */
const API_MAIN = fileURLToPath(new URL("../../src/api/main.ts", import.meta.url));
const WORKER_MAIN = fileURLToPath(new URL("../../workers/main.ts", import.meta.url));
const PROJECTOR_MAIN = fileURLToPath(new URL("../../projections/main.ts", import.meta.url));
const MODEL = "counting-model";
const TOKENS = 8;
const PROMPT_TOKENS = 20;
const REQUESTS = 40;

let db: TestDatabase;
let redis: TestRedis;
let upstream: CountingUpstream;
let dir: string;
let account: TestAccount;
let key: string;
const apis: string[] = [];
const children: ChildProcess[] = [];
const logs: string[] = [];

beforeAll(async () => {
  db = await createTestDatabase();
  redis = await createTestRedis();
  upstream = await startCountingUpstream({ totalTokens: TOKENS, tokenDelayMs: 15, promptTokens: PROMPT_TOKENS });
  dir = await mkdtemp(path.join(tmpdir(), "scale-out-"));
  const model = countingModel(upstream, { id: MODEL, maxConcurrency: 4 });
  const registry = path.join(dir, "registry.json");
  await writeFile(registry, JSON.stringify({ price_table_version: "test-1", models: [model] }));
  const env = {
    PATH: process.env.PATH ?? "",
    DATABASE_URL: db.url,
    REDIS_URL: TEST_REDIS_URL,
    REDIS_PREFIX: redis.prefix,
    MODELS_CONFIG: registry,
    WORKER_HEARTBEAT_MS: "500",
    PROJECTOR_POLL_MS: "20",
    LOG_LEVEL: "warn",
  };
  for (let i = 0; i < 2; i++) {
    const port = await freePort();
    children.push(spawnRole(API_MAIN, { ...env, PORT: String(port), HOST: "127.0.0.1" }));
    apis.push(`http://127.0.0.1:${port}`);
    children.push(spawnRole(WORKER_MAIN, env), spawnRole(PROJECTOR_MAIN, env));
  }
  account = await createTestAccount(db.pool, { monthlyBudgetChf: 100 });
  // Both APIs answer, and both workers beat for the model.
  const presence = new InferenceKeys(redis.prefix).modelWorkers(MODEL);
  await eventually(async () => ((await redis.redis.zcount(presence, Date.now(), "+inf")) === 2 ? true : undefined), 60_000).catch((error: unknown) => {
    throw new Error(`the workers did not start: ${logs.join("")}`, { cause: error });
  });
  for (const api of apis) {
    await eventually(async () => ((await fetch(`${api}/v1/models`).catch(() => null))?.status === 403 ? true : undefined), 60_000).catch((error: unknown) => {
      throw new Error(`the API at ${api} did not start: ${logs.join("")}`, { cause: error });
    });
  }
  key = (await createKey({ request: requestVia(apis[0]!) } as Parameters<typeof createKey>[0], account.sessionToken)).key;
}, 120_000);

afterAll(async () => {
  await Promise.all(children.map(stopChild));
  await upstream?.close();
  await redis?.close();
  await db?.drop();
  if (dir) await rm(dir, { recursive: true, force: true });
}, 60_000);

describe("two API processes, two workers and two projectors on one database and one Redis", () => {
  it(`answers ${REQUESTS} mixed streamed and non-streamed requests sent to both APIs once each, and charges each once`, async () => {
    const results = await Promise.all(Array.from({ length: REQUESTS }, (_, i) => chat(apis[i % 2]!, { stream: i % 4 >= 2, index: i })));
    // Every request answered, each with a completion of its own and the whole reply.
    expect(results.map((r) => r.status)).toEqual(Array(REQUESTS).fill(200));
    for (const result of results) {
      expect(result.text).toBe(countingReply(TOKENS));
      expect(result.usage).toEqual({ prompt_tokens: PROMPT_TOKENS, completion_tokens: TOKENS, total_tokens: PROMPT_TOKENS + TOKENS });
    }
    const ids = results.map((r) => r.id);
    expect(new Set(ids).size).toBe(REQUESTS);

    // Charged once: one UsageRecorded per completion, and no other for the account.
    const charged: UsageRecordedData[] = [];
    for (const id of ids) {
      const events = await completionEvents(db.pool, id);
      expect(events.map((e) => e.type)).toEqual(["UsageRecorded"]);
      expect(events[0]!.data).toMatchObject({ accountId: account.accountId, outcome: "finished", promptTokens: PROMPT_TOKENS, completionTokens: TOKENS });
      charged.push(events[0]!.data);
    }
    const all = await db.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM es_events WHERE event_type = 'UsageRecorded' AND data->>'accountId' = $1", [
      account.accountId,
    ]);
    expect(all.rows[0]!.n).toBe(REQUESTS);

    // The budget spent is the sum of the charges, with nothing left held.
    const total = charged.reduce((sum, e) => sum + e.costMicroChf, 0);
    expect(total).toBeGreaterThan(0);
    const budget = await eventually(async () => {
      const rows = await db.pool.query<{ held: string; spent: string }>(
        "SELECT held_micro_chf::bigint AS held, spent_micro_chf::bigint AS spent FROM rm_budget WHERE account_id = $1",
        [account.accountId],
      );
      const row = rows.rows[0];
      return row && Number(row.held) === 0 ? row : undefined;
    }, 20_000);
    expect(Number(budget.spent)).toBe(total);

    // The projectors (one active, one standing by) catch up: the usage read models are the sums of the events.
    // The per-key and the per-account read models are two projections with checkpoints of their own:
    // both are waited for (one may be a batch behind the other when read).
    const expected = expectedUsage(charged);
    const requestsIn = (rows: { requests: number }[]) => rows.reduce((n, r) => n + r.requests, 0);
    const live = await eventually(async () => {
      const rows = await liveUsage(db.pool, [account.accountId]);
      return requestsIn(rows.keyDays) >= REQUESTS && requestsIn(rows.accountDays) >= REQUESTS ? rows : undefined;
    }, 30_000);
    expect(live).toEqual(expected);
  }, 180_000);
});

async function chat(api: string, options: { stream: boolean; index: number }): Promise<ChatResult> {
  const body = { model: MODEL, messages: [{ role: "user", content: `Count, request ${options.index}.` }], max_tokens: TOKENS + 100, temperature: 0 };
  return chatThrough(api, key, body, options.stream);
}

function spawnRole(main: string, env: Record<string, string>): ChildProcess {
  const child = spawn(process.execPath, [main], { env, stdio: ["ignore", "pipe", "pipe"] });
  child.stdout?.setEncoding("utf8").on("data", (text: string) => logs.push(`${path.basename(path.dirname(main))}: ${text}`));
  child.stderr?.setEncoding("utf8").on("data", (text: string) => logs.push(`${path.basename(path.dirname(main))}: ${text}`));
  return child;
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGKILL");
  await exited;
}
