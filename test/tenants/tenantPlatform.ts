import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import type { ModelEntry } from "../../src/models/modelRegistrySchema.ts";
import { startCountingUpstream, type CountingUpstream } from "../faults/countingUpstream.ts";
import { eventually } from "../support/eventually.ts";
import { freePort } from "../support/freePort.ts";
import { createTestAccount } from "../support/testAccounts.ts";
import { createTestDatabase, type TestDatabase } from "../support/testDatabase.ts";
import { createTestRedis, TEST_REDIS_URL, type TestRedis } from "../support/testRedis.ts";

const API_MAIN = fileURLToPath(new URL("../../src/api/main.ts", import.meta.url));
const WORKER_MAIN = fileURLToPath(new URL("../../workers/main.ts", import.meta.url));
export const TENANT_MODEL = "counting-model";
export const ADMIN_TOKEN = "tenant-test-admin-token-0123456789abcdef";

/** A client of the platform: an account and one API key. */
export type Tenant = { accountId: string; key: string; sessionToken: string };

/**
 * Several tenants on one pool: `apis` API processes and `workers` worker processes (the production
 * entry points, each its own OS process) on a fresh database and a unique Redis prefix, serving one
 * stand-in upstream model (`slotsPerWorker` slots per worker; each job streams `tokens` tokens
 * `tokenDelayMs` apart).
 */
export class TenantPlatform {
  readonly apis: string[] = [];
  readonly logs: string[] = [];
  readonly #children: ChildProcess[] = [];
  db!: TestDatabase;
  redis!: TestRedis;
  upstream!: CountingUpstream;
  #dir = "";

  static async start(options: {
    apis: number;
    workers: number;
    slotsPerWorker: number;
    tokens: number;
    tokenDelayMs: number;
    env?: Record<string, string>;
  }): Promise<TenantPlatform> {
    const platform = new TenantPlatform();
    platform.db = await createTestDatabase();
    platform.redis = await createTestRedis();
    platform.upstream = await startCountingUpstream({ totalTokens: options.tokens, tokenDelayMs: options.tokenDelayMs, promptTokens: 20 });
    platform.#dir = await mkdtemp(path.join(tmpdir(), "tenants-"));
    const model: ModelEntry = {
      id: TENANT_MODEL,
      owned_by: "test-lab",
      engine: { type: "upstream", baseUrl: platform.upstream.baseUrl, model: "counting", maxConcurrency: options.slotsPerWorker },
      capabilities: { chat: true, completions: true, embeddings: false, tools: false, json_schema: false, logprobs: false, reasoning: false },
      context_length: 8192,
      pricing: { input_per_million_chf: 1, output_per_million_chf: 2 },
    };
    const registry = path.join(platform.#dir, "registry.json");
    await writeFile(registry, JSON.stringify({ price_table_version: "test-1", models: [model] }));
    const env = {
      PATH: process.env.PATH ?? "",
      DATABASE_URL: platform.db.url,
      REDIS_URL: TEST_REDIS_URL,
      REDIS_PREFIX: platform.redis.prefix,
      MODELS_CONFIG: registry,
      WORKER_HEARTBEAT_MS: "500",
      LOG_LEVEL: "warn",
      ADMIN_TOKEN,
      ...options.env,
    };
    for (let i = 0; i < options.apis; i++) {
      const port = await freePort();
      platform.#spawn(API_MAIN, { ...env, PORT: String(port), HOST: "127.0.0.1" });
      platform.apis.push(`http://127.0.0.1:${port}`);
    }
    for (let i = 0; i < options.workers; i++) platform.#spawn(WORKER_MAIN, env);
    const presence = new InferenceKeys(platform.redis.prefix).modelWorkers(TENANT_MODEL);
    await eventually(async () => ((await platform.redis.redis.zcount(presence, Date.now(), "+inf")) === options.workers ? true : undefined), 60_000).catch(
      (error: unknown) => {
        throw new Error(`the workers did not start: ${platform.logs.join("")}`, { cause: error });
      },
    );
    for (const api of platform.apis) {
      await eventually(async () => ((await fetch(`${api}/v1/models`).catch(() => null))?.status === 403 ? true : undefined), 60_000).catch((error: unknown) => {
        throw new Error(`the API at ${api} did not start: ${platform.logs.join("")}`, { cause: error });
      });
    }
    return platform;
  }

  /** A new account with an active subscription and one API key. */
  async tenant(monthlyBudgetChf = 100): Promise<Tenant> {
    const account = await createTestAccount(this.db.pool, { monthlyBudgetChf });
    return { accountId: account.accountId, sessionToken: account.sessionToken, key: await this.newKey(account.sessionToken) };
  }

  /** Another API key of the account of this session. */
  async newKey(sessionToken: string): Promise<string> {
    const response = await fetch(`${this.apis[0]}/api/v1/accounts/user/api-keys/create/`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${sessionToken}` },
      body: JSON.stringify({ name: "tenant key" }),
    });
    const body = (await response.json()) as { key: string };
    if (response.status !== 201) throw new Error(`could not create a key: ${response.status} ${JSON.stringify(body)}`);
    return body.key;
  }

  /** Sets an account's rate limits through the admin API. */
  async setRateLimits(accountId: string, limits: Record<string, number | null>): Promise<Response> {
    return fetch(`${this.apis[0]}/api/v1/admin/accounts/${accountId}/rate_limits`, {
      method: "PUT",
      headers: { "content-type": "application/json", authorization: `Bearer ${ADMIN_TOKEN}` },
      body: JSON.stringify(limits),
    });
  }

  async stop(): Promise<void> {
    await Promise.all(this.#children.map(stopChild));
    await this.upstream?.close();
    await this.redis?.close();
    await this.db?.drop();
    if (this.#dir) await rm(this.#dir, { recursive: true, force: true });
  }

  #spawn(main: string, env: Record<string, string>): void {
    const child = spawn(process.execPath, [main], { env, stdio: ["ignore", "pipe", "pipe"] });
    const role = path.basename(path.dirname(main));
    child.stdout?.setEncoding("utf8").on("data", (text: string) => this.logs.push(`${role}: ${text}`));
    child.stderr?.setEncoding("utf8").on("data", (text: string) => this.logs.push(`${role}: ${text}`));
    this.#children.push(child);
  }
}

/** A non-streamed chat request; its status, headers, body and when it ended (performance.now()). */
export async function tenantChat(
  api: string,
  key: string,
  options: { maxTokens?: number; content?: string; stream?: boolean } = {},
): Promise<{ status: number; headers: Headers; body: any; endedAt: number }> {
  const response = await fetch(`${api}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({
      model: TENANT_MODEL,
      messages: [{ role: "user", content: options.content ?? "Count." }],
      max_tokens: options.maxTokens ?? 50,
      ...(options.stream ? { stream: true } : {}),
    }),
  });
  const text = await response.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {}
  return { status: response.status, headers: response.headers, body, endedAt: performance.now() };
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGKILL");
  await exited;
}
