import { type ChildProcess, spawn } from "node:child_process";
import { writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { ModelEntry } from "../../src/models/modelRegistrySchema.ts";
import { createKey } from "../keys/keySteps.ts";
import { eventually } from "../support/eventually.ts";
import { freePort } from "../support/freePort.ts";
import { createTestAccount } from "../support/testAccounts.ts";
import type { TestDatabase } from "../support/testDatabase.ts";
import { TEST_REDIS_URL, type TestRedis } from "../support/testRedis.ts";
import { requestVia } from "./processChat.ts";

const MAIN = fileURLToPath(new URL("../../src/main.ts", import.meta.url));

/** `npm start`'s process (every role in one), started by a test: its API, its output, its exit, and a key of a new account. */
export type NpmStartProcess = { api: string; child: ChildProcess; logs: string[]; exited: Promise<number | null>; key: string };

/**
 * Starts src/main.ts as `npm start` does, on a free port, with a model registry of `models` written to
 * `dir`, and waits until it serves; then creates an account with a budget and a key through its API.
 */
export async function startNpmStartProcess(options: {
  db: TestDatabase;
  /** Its key prefix (the test's, whose close() deletes its keys). */
  redis: TestRedis;
  dir: string;
  models: ModelEntry[];
  env?: Record<string, string>;
}): Promise<NpmStartProcess> {
  const registry = path.join(options.dir, "registry.json");
  await writeFile(registry, JSON.stringify({ price_table_version: "test-1", models: options.models }));
  const port = await freePort();
  const api = `http://127.0.0.1:${port}`;
  const logs: string[] = [];
  const child = spawn(process.execPath, [MAIN], {
    env: {
      PATH: process.env.PATH ?? "",
      DATABASE_URL: options.db.url,
      REDIS_URL: TEST_REDIS_URL,
      REDIS_PREFIX: options.redis.prefix,
      MODELS_CONFIG: registry,
      PORT: String(port),
      HOST: "127.0.0.1",
      METRICS_PORT: String(await freePort()),
      LOG_LEVEL: "warn",
      ...options.env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stdout?.setEncoding("utf8").on("data", (text: string) => logs.push(text));
  child.stderr?.setEncoding("utf8").on("data", (text: string) => logs.push(text));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  await eventually(async () => ((await fetch(`${api}/v1/models`).catch(() => null))?.status === 403 ? true : undefined), 60_000).catch((error: unknown) => {
    throw new Error(`the service did not start: ${logs.join("")}`, { cause: error });
  });
  const account = await createTestAccount(options.db.pool, { monthlyBudgetChf: 100 });
  const { key } = await createKey({ request: requestVia(api) } as Parameters<typeof createKey>[0], account.sessionToken);
  return { api, child, logs, exited, key };
}
