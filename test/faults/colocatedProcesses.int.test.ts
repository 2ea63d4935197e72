import type { ChildProcess } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Redis as IORedis } from "ioredis";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import type { ModelEntry } from "../../src/models/modelRegistrySchema.ts";
import { createKey } from "../keys/keySteps.ts";
import { completionEvents } from "../inference/inferenceSteps.ts";
import { eventually } from "../support/eventually.ts";
import { freePort } from "../support/freePort.ts";
import { type RedisServer, startRedisServer } from "../support/redisServer.ts";
import { createTestAccount, type TestAccount } from "../support/testAccounts.ts";
import { createTestDatabase, type TestDatabase } from "../support/testDatabase.ts";
import { countingReply, type CountingUpstream, startCountingUpstream } from "./countingUpstream.ts";
import { type ChatResult, chatThrough, requestVia } from "./processChat.ts";
import { killChild, spawnRoles } from "./roleProcesses.ts";

/**
 * Roles started by the launcher of `npm start` (src/main.ts, runRoles), each set an OS process of its
 * own, on one database and a private Redis watched with MONITOR:
 *
 * - `both`: API and worker roles in one process, its worker serving LOCAL only;
 * - `api`: an API role alone;
 * - `worker`: a worker role alone, serving REMOTE only.
 *
 * The jobs `both` enqueues for LOCAL are answered in process (no PUBLISH); those `api` enqueues for
 * LOCAL are published by `both`'s worker to `api`; those `both` enqueues for REMOTE are published to
 * `both` by `worker`. Every request is answered once and charged once.
 */
const LOCAL = "local-model";
const REMOTE = "remote-model";
const TOKENS = 8;
const PROMPT_TOKENS = 20;

let db: TestDatabase;
let redis: RedisServer;
let monitor: IORedis;
let upstream: CountingUpstream;
let dir: string;
let account: TestAccount;
let key: string;
let both: string;
let apiOnly: string;
const children: ChildProcess[] = [];
const logs: string[] = [];
/** The channels of the PUBLISH commands Redis received. */
let publishes: string[] = [];
const prefix = `test-colocated-${process.pid}`;

beforeAll(async () => {
  db = await createTestDatabase();
  redis = await startRedisServer();
  upstream = await startCountingUpstream({ totalTokens: TOKENS, tokenDelayMs: 5, promptTokens: PROMPT_TOKENS });
  dir = await mkdtemp(path.join(tmpdir(), "colocated-"));
  const model = (id: string): ModelEntry => ({
    id,
    owned_by: "test-lab",
    engine: { type: "upstream", baseUrl: upstream.baseUrl, model: "counting", maxConcurrency: 4 },
    capabilities: { chat: true, completions: true, embeddings: false, tools: false, json_schema: false, logprobs: false, reasoning: false },
    context_length: 8192,
    pricing: { input_per_million_chf: 1, output_per_million_chf: 2 },
  });
  const registry = path.join(dir, "registry.json");
  await writeFile(registry, JSON.stringify({ price_table_version: "test-1", models: [model(LOCAL), model(REMOTE)] }));
  const env = {
    PATH: process.env.PATH ?? "",
    DATABASE_URL: db.url,
    REDIS_URL: redis.url,
    REDIS_PREFIX: prefix,
    MODELS_CONFIG: registry,
    WORKER_HEARTBEAT_MS: "500",
    METRICS_PORT: "0",
    LOG_LEVEL: "warn",
  };
  const [bothPort, apiPort] = [await freePort(), await freePort()];
  both = `http://127.0.0.1:${bothPort}`;
  apiOnly = `http://127.0.0.1:${apiPort}`;
  // The first one creates and migrates the database.
  children.push(spawnRoles(["api", "worker"], { ...env, PORT: String(bothPort), HOST: "127.0.0.1", WORKER_MODELS: LOCAL }, logs));
  await eventually(async () => ((await fetch(`${both}/v1/models`).catch(() => null))?.status === 403 ? true : undefined), 60_000).catch((error: unknown) => {
    throw new Error(`the API did not start: ${logs.join("")}`, { cause: error });
  });
  children.push(
    spawnRoles(["api"], { ...env, PORT: String(apiPort), HOST: "127.0.0.1" }, logs),
    spawnRoles(["worker"], { ...env, WORKER_MODELS: REMOTE }, logs),
  );
  const keys = new InferenceKeys(prefix);
  const watcher = new IORedis(redis.url).on("error", () => undefined);
  await eventually(async () => {
    const live = await Promise.all([LOCAL, REMOTE].map((id) => watcher.zcount(keys.modelWorkers(id), Date.now(), "+inf")));
    const api = (await fetch(`${apiOnly}/v1/models`).catch(() => null))?.status === 403;
    return live.every((n) => n === 1) && api ? true : undefined;
  }, 60_000).catch((error: unknown) => {
    throw new Error(`the roles did not start: ${logs.join("")}`, { cause: error });
  });
  watcher.disconnect();
  account = await createTestAccount(db.pool, { monthlyBudgetChf: 100 });
  key = (await createKey({ request: requestVia(both) } as Parameters<typeof createKey>[0], account.sessionToken)).key;
  monitor = await watchWith(redis.url);
  monitor.on("monitor", (_time: string, args: string[]) => {
    if (args[0]?.toLowerCase() === "publish" && args[1]?.startsWith(`${prefix}:replies:`)) publishes.push(args[1]);
  });
}, 120_000);

afterAll(async () => {
  monitor?.disconnect();
  await Promise.all(children.map(killChild));
  await upstream?.close();
  await redis?.stop();
  await db?.drop();
  if (dir) await rm(dir, { recursive: true, force: true });
}, 60_000);

beforeEach(() => {
  publishes = [];
});

describe("API and worker roles in one process (src/main.ts), next to roles in processes of their own", () => {
  it("answers the jobs of its own API in process: no reply is published", async () => {
    const results = await Promise.all(Array.from({ length: 12 }, (_, i) => chat(both, LOCAL, i % 2 === 0, i)));
    await expectAnsweredAndChargedOnce(results);
    await settleMonitor();
    expect(publishes).toEqual([]);
  }, 60_000);

  it("serves another process's API, and is served by another process's worker, by PUBLISH", async () => {
    const requests = [
      ...Array.from({ length: 8 }, (_, i) => chat(both, LOCAL, i % 2 === 0, i)),
      ...Array.from({ length: 8 }, (_, i) => chat(apiOnly, LOCAL, i % 2 === 0, i)),
      ...Array.from({ length: 8 }, (_, i) => chat(both, REMOTE, i % 2 === 0, i)),
    ];
    const results = await Promise.all(requests);
    await expectAnsweredAndChargedOnce(results);
    await settleMonitor();
    // Two reply channels published to: `api`'s (by `both`'s worker) and `both`'s (by `worker`).
    expect(new Set(publishes).size, logs.join("")).toBe(2);
  }, 60_000);
});

async function expectAnsweredAndChargedOnce(results: ChatResult[]): Promise<void> {
  expect(results.map((r) => r.status)).toEqual(results.map(() => 200));
  for (const result of results) {
    expect(result.text).toBe(countingReply(TOKENS));
    expect(result.usage).toEqual({ prompt_tokens: PROMPT_TOKENS, completion_tokens: TOKENS, total_tokens: PROMPT_TOKENS + TOKENS });
    const events = await completionEvents(db.pool, result.id);
    expect(events.map((e) => e.type)).toEqual(["UsageRecorded"]);
    expect(events[0]!.data).toMatchObject({ outcome: "finished", completionTokens: TOKENS });
  }
  expect(new Set(results.map((r) => r.id)).size).toBe(results.length);
}

/** A MONITOR connection to `url` (the connection it is made from is closed). */
async function watchWith(url: string): Promise<IORedis> {
  const client = new IORedis(url).on("error", () => undefined);
  try {
    return (await client.monitor()).on("error", () => undefined);
  } finally {
    client.disconnect();
  }
}

/** Waits until MONITOR reported a marker PUBLISH issued now (every PUBLISH before it was reported too), then drops the marker. */
async function settleMonitor(): Promise<void> {
  const marker = `${prefix}:replies:marker-${Math.random()}`;
  const client = new IORedis(redis.url).on("error", () => undefined);
  await client.publish(marker, "");
  client.disconnect();
  await eventually(async () => (publishes.includes(marker) ? true : undefined), 5_000);
  publishes = publishes.filter((channel) => channel !== marker);
}

async function chat(api: string, model: string, stream: boolean, index: number): Promise<ChatResult> {
  const body = { model, messages: [{ role: "user", content: `Count, request ${index}.` }], max_tokens: TOKENS + 100, temperature: 0 };
  return chatThrough(api, key, body, stream, AbortSignal.timeout(30_000));
}
