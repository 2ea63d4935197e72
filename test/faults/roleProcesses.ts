import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import type { ModelEntry } from "../../src/models/modelRegistrySchema.ts";
import { fileURLToPath } from "node:url";
import { eventually } from "../support/eventually.ts";
import { freePort } from "../support/freePort.ts";
import { type RedisServer, startRedisServer } from "../support/redisServer.ts";
import { createTestDatabase, type TestDatabase } from "../support/testDatabase.ts";

const MAIN = fileURLToPath(new URL("../../src/main.ts", import.meta.url));

/** Starts `roles` of src/main.ts (`--role` each) in a process of their own; its output goes to `logs`, each line named by its roles. */
export function spawnRoles(roles: string[], env: Record<string, string>, logs: string[]): ChildProcess {
  const child = spawn(process.execPath, [MAIN, ...roles.flatMap((role) => ["--role", role])], { env, stdio: ["ignore", "pipe", "pipe"] });
  const name = roles.join("+");
  child.stdout?.setEncoding("utf8").on("data", (text: string) => logs.push(`${name}: ${text}`));
  child.stderr?.setEncoding("utf8").on("data", (text: string) => logs.push(`${name}: ${text}`));
  return child;
}

/** Kills a process a test started (SIGKILL) and waits for its exit; one that exited already is left alone. */
export async function killChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGKILL");
  await exited;
}

/** Starts an API role process on a free port (kept in `children`); answers its base URL and process once it serves. */
export async function startApiRole(env: Record<string, string>, logs: string[], children: ChildProcess[]): Promise<{ api: string; child: ChildProcess }> {
  const port = await freePort();
  const api = `http://127.0.0.1:${port}`;
  const child = spawnRoles(["api"], { ...env, PORT: String(port) }, logs);
  children.push(child);
  await eventually(async () => ((await fetch(`${api}/v1/models`).catch(() => null))?.status === 403 ? true : undefined), 60_000).catch((error: unknown) => {
    throw new Error(`the API did not start: ${logs.join("")}`, { cause: error });
  });
  return { api, child };
}

/** The ids of the models `api` lists for `key` (none while it does not answer 200: its worker not live yet). */
export async function listModelIds(api: string, key: string): Promise<string[]> {
  const response = await fetch(`${api}/v1/models`, { headers: { authorization: `Bearer ${key}` } }).catch(() => null);
  if (response?.status !== 200) return [];
  return ((await response.json()) as { data: { id: string }[] }).data.map((m) => m.id);
}

/**
 * The environment of role processes on one database and Redis: `models` written as the registry in `dir`,
 * metrics off, loopback, warnings only; `extra` on top (timeouts of the test).
 */
export async function roleEnv(options: {
  dir: string;
  databaseUrl: string;
  redisUrl: string;
  prefix: string;
  models: ModelEntry[];
  extra?: Record<string, string>;
}): Promise<Record<string, string>> {
  const registry = path.join(options.dir, "registry.json");
  await writeFile(registry, JSON.stringify({ price_table_version: "test-1", models: options.models }));
  return {
    PATH: process.env.PATH ?? "",
    DATABASE_URL: options.databaseUrl,
    REDIS_URL: options.redisUrl,
    REDIS_PREFIX: options.prefix,
    MODELS_CONFIG: registry,
    METRICS_PORT: "0",
    HOST: "127.0.0.1",
    LOG_LEVEL: "warn",
    ...options.extra,
  };
}

/** What role processes of a test run on: a fresh database, a private Redis, a folder; the processes started and their output. */
export type RoleFixture = { db: TestDatabase; redis: RedisServer; dir: string; children: ChildProcess[]; logs: string[]; stop(): Promise<void> };

/** A RoleFixture; `stop()` kills the processes started on it and removes the rest. */
export async function startRoleFixture(name: string): Promise<RoleFixture> {
  const db = await createTestDatabase();
  const redis = await startRedisServer();
  const dir = await mkdtemp(path.join(tmpdir(), `${name}-`));
  const children: ChildProcess[] = [];
  return {
    db,
    redis,
    dir,
    children,
    logs: [],
    async stop() {
      await Promise.all(children.map(killChild));
      await redis.stop();
      await db.drop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
