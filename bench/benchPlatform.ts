import { randomBytes, randomUUID } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import { executeAccountCommand } from "../src/ledger/accounts/executeAccountCommand.ts";
import { createPool } from "../src/db/createPool.ts";
import { createRedis } from "../src/redis/createRedis.ts";
import { deleteKeysByPrefix } from "../src/redis/deleteKeysByPrefix.ts";
import { chfToMicro } from "../src/ledger/money.ts";
import { createSession } from "../src/api/sessions/sessionStore.ts";
import { SERVICE_NODE_FLAGS, SERVICE_PRELOAD } from "./serviceNodeFlags.ts";
import { startChild, type Child } from "./childProcess.ts";
import type { StreamTarget } from "./streamClient.ts";

export type BenchPlatform = {
  /** The platform's `GET /metrics` (one-process layout only; null with separate processes). */
  metricsUrl: string | null;
  target: StreamTarget;
  description: string;
  /** Process ids of the platform's processes (all roles, or API and worker), for CPU accounting. */
  pids: number[];
  /** The process that runs the API role (the only one when every role is in one process). */
  apiPid: number;
  /** The bench's own database (its PostgreSQL backends can be told from other databases' ones). */
  databaseName: string;
  /** The bench's database URL and Redis prefix (workloads that reach past the API). */
  databaseUrl: string;
  redisPrefix: string;
  /** The accounts of `accounts` (the first is the target's): id and API key. */
  tenants: { accountId: string; key: string }[];
  stop(): Promise<void>;
};

export type BenchPlatformOptions = {
  standInBaseUrl: string;
  /** Streams the worker takes at once for the bench model (the registry's maxConcurrency). */
  maxConcurrency: number;
  /** From src/config.ts: where PostgreSQL and Redis are. A fresh database and Redis prefix are used. */
  databaseUrl: string;
  redisUrl: string;
  /**
   * false: one process with every role (api, worker, projector), started exactly as `npm start` starts
   * it (its V8 flags, its preload, `src/main.ts` with no --role); true: the older layout, API and worker
   * as two processes (`--role api`, `--role worker`, the V8 flags only) and no projector.
   */
  separateProcesses: boolean;
  /** Extra node flags for the platform processes (e.g. --cpu-prof). */
  nodeArgs?: string[];
  /** Accounts to create, each with one key (default 1). */
  accounts?: number;
  /** Extra environment of the platform processes. */
  env?: Record<string, string>;
};

export const BENCH_MODEL = "bench-upstream";

/**
 * The real platform as child processes (see `separateProcesses`) on a fresh
 * database and Redis prefix, with a temporary MODELS_CONFIG routing BENCH_MODEL to the stand-in through
 * the upstream adapter, and an account (active subscription, large budget) whose API key is created
 * through the key API. stop() ends the children and removes the database, the Redis keys and the file.
 */
export async function startBenchPlatform(options: BenchPlatformOptions): Promise<BenchPlatform> {
  const suffix = randomBytes(5).toString("hex");
  const dbUrl = new URL(options.databaseUrl);
  dbUrl.pathname = `/inference_bench_${suffix}`;
  const databaseUrl = dbUrl.toString();
  const redisPrefix = `bench-${suffix}`;
  const dir = await mkdtemp(path.join(tmpdir(), "inference-bench-"));
  const modelsConfig = path.join(dir, "models.json");
  await writeFile(modelsConfig, JSON.stringify(benchRegistry(options.standInBaseUrl, options.maxConcurrency), null, 2));
  const port = await freePort();
  const apiUrl = `http://127.0.0.1:${port}`;
  // The one process's /metrics listener (not with separate processes: they would share the port).
  const metricsPort = options.separateProcesses ? null : await freePort();
  const env = {
    DATABASE_URL: databaseUrl,
    REDIS_URL: options.redisUrl,
    REDIS_PREFIX: redisPrefix,
    HOST: "127.0.0.1",
    PORT: String(port),
    MODELS_CONFIG: modelsConfig,
    LOG_LEVEL: "warn",
    ...(metricsPort === null ? {} : { METRICS_PORT: String(metricsPort) }),
    ...options.env,
  };
  const children: Child[] = [];
  let pool: pg.Pool | null = null;
  const stop = async (): Promise<void> => {
    for (const child of children.reverse()) await child.stop();
    await pool?.end();
    await dropDatabase(databaseUrl).catch(() => undefined);
    await deleteRedisPrefix(options.redisUrl, redisPrefix).catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  };
  try {
    // No role named: every role of `npm start`, with its preload too.
    const layout = options.separateProcesses ? [["api"], ["worker"]] : [[]];
    const preload = options.separateProcesses ? [] : SERVICE_PRELOAD;
    for (const roles of layout) {
      // The first process creates and migrates the database; the next starts once it is up.
      children.push(
        await startChild(
          "src/main.ts",
          roles.flatMap((role) => ["--role", role]),
          { env, timeoutMs: 60_000, nodeArgs: [...SERVICE_NODE_FLAGS, ...preload, ...(options.nodeArgs ?? [])] },
        ),
      );
      if (roles.length === 0 || roles.includes("api"))
        await waitFor(`${apiUrl}/healthz`, {}, (status) => status === 200, 60_000, "the API to answer /healthz", children);
    }
    pool = createPool(databaseUrl, 2);
    const tenants = [];
    for (let i = 0; i < (options.accounts ?? 1); i++) tenants.push(await createAccountAndKey(pool, apiUrl));
    const key = tenants[0]!.key;
    const auth = { authorization: `Bearer ${key}` };
    await waitFor(
      `${apiUrl}/v1/models/${BENCH_MODEL}`,
      auth,
      (status) => status === 200,
      60_000,
      `GET /v1/models/${BENCH_MODEL} to list the bench model (a live worker)`,
      children,
    );
    const pids = children.map((child) => child.process.pid).filter((pid): pid is number => pid !== undefined);
    return {
      target: { url: `${apiUrl}/v1/chat/completions`, headers: auth, model: BENCH_MODEL },
      metricsUrl: metricsPort === null ? null : `http://127.0.0.1:${metricsPort}/metrics`,
      description: options.separateProcesses
        ? "platform: API and worker in two processes (no projector)"
        : "platform: one process with every role (api, worker, projector), started as `npm start` starts it",
      pids,
      apiPid: pids[0]!,
      databaseName: decodeURIComponent(dbUrl.pathname.slice(1)),
      databaseUrl,
      redisPrefix,
      tenants,
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

/**
 * The platform settings that let one bench account run `clients` streams at once, every one admitted:
 * the per-account and per-key limits (requests per minute, concurrent requests) well above what the
 * bench can ask, the account's share of the queue unbounded (QUEUE_ACCOUNT_SHARE=1) and the queue's
 * bound (QUEUE_MAX_WAITING) above `clients`. The defaults (3000 requests a minute, 256 at once, half
 * of 1000 waiting) would refuse a 512-stream level or a fast 256-client one with 429s.
 */
export function benchLimitsEnv(clients: number): Record<string, string> {
  return {
    RATE_LIMIT_REQUESTS_PER_MINUTE: "1000000",
    RATE_LIMIT_KEY_REQUESTS_PER_MINUTE: "1000000",
    RATE_LIMIT_CONCURRENT_REQUESTS: String(Math.max(256, 2 * clients)),
    RATE_LIMIT_KEY_CONCURRENT_REQUESTS: String(Math.max(256, 2 * clients)),
    QUEUE_ACCOUNT_SHARE: "1",
    QUEUE_MAX_WAITING: String(Math.max(1000, 2 * clients)),
  };
}

function benchRegistry(standInBaseUrl: string, maxConcurrency: number) {
  return {
    price_table_version: "bench",
    models: [
      {
        id: BENCH_MODEL,
        owned_by: "bench",
        engine: { type: "upstream", baseUrl: standInBaseUrl, model: "stand-in", maxConcurrency },
        capabilities: { chat: true, completions: true },
        context_length: 8192,
        pricing: { input_per_million_chf: 0.1, output_per_million_chf: 0.4 },
      },
    ],
  };
}

async function createAccountAndKey(pool: pg.Pool, apiUrl: string): Promise<{ accountId: string; key: string }> {
  const accountId = randomUUID();
  const now = new Date();
  const metadata = { actor: "bench", correlationId: randomUUID() };
  // Created before any API process caches it: nobody to tell of the change.
  const accounts = { pool, changes: { committed: async () => undefined } };
  await executeAccountCommand(accounts, accountId, { type: "RegisterAccount", accountId, email: `bench-${accountId.slice(0, 8)}@example.test`, now }, metadata);
  await executeAccountCommand(accounts, accountId, { type: "SetSubscription", status: "active", monthlyBudgetMicroChf: chfToMicro(1_000_000), now }, metadata);
  const session = await createSession(pool, accountId, now, 3600_000);
  const response = await fetch(`${apiUrl}/api/v1/accounts/user/api-keys/create/`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${session.token}` },
    body: JSON.stringify({ name: "bench" }),
  });
  const body = (await response.json().catch(() => null)) as { key?: unknown } | null;
  if (response.status !== 201 || typeof body?.key !== "string") throw new Error(`creating the bench API key answered ${response.status}`);
  return { accountId, key: body.key };
}

/** Polls url (GET) every 100 ms until accept(status), the deadline, or a platform process dying. */
async function waitFor(
  url: string,
  headers: Record<string, string>,
  accept: (status: number) => boolean,
  timeoutMs: number,
  what: string,
  children: Child[],
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = "no answer";
  while (Date.now() < deadline) {
    const dead = children.find((child) => child.process.exitCode !== null || child.process.signalCode !== null);
    if (dead) throw new Error(`a platform process exited (${dead.process.exitCode ?? dead.process.signalCode}) while waiting for ${what}`);
    try {
      const response = await fetch(url, { headers, signal: AbortSignal.timeout(2_000) });
      const text = await response.text();
      if (accept(response.status)) return;
      last = `${response.status} ${text.slice(0, 200)}`;
    } catch (error) {
      last = (error as Error).message;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`gave up waiting for ${what} after ${timeoutMs} ms (last: ${last})`);
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

async function dropDatabase(databaseUrl: string): Promise<void> {
  const url = new URL(databaseUrl);
  const name = decodeURIComponent(url.pathname.slice(1));
  url.pathname = "/postgres";
  const client = new pg.Client({ connectionString: url.toString() });
  await client.connect();
  try {
    await client.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)} WITH (FORCE)`);
  } finally {
    await client.end();
  }
}

async function deleteRedisPrefix(redisUrl: string, prefix: string): Promise<void> {
  const redis = createRedis(redisUrl, { kind: "fail-fast" });
  try {
    await deleteKeysByPrefix(redis, prefix);
  } finally {
    redis.disconnect();
  }
}
