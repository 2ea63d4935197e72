import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createKey } from "../keys/keySteps.ts";
import { eventually } from "../support/eventually.ts";
import { freePort } from "../support/freePort.ts";
import { createTestAccount } from "../support/testAccounts.ts";
import { createTestDatabase, type TestDatabase } from "../support/testDatabase.ts";
import { TEST_REDIS_URL } from "../support/testRedis.ts";
import { countingModel, countingReply, type CountingUpstream, startCountingUpstream } from "./countingUpstream.ts";
import { chatThrough, requestVia } from "./processChat.ts";

/**
 * `npm start` (every role in one process) told to stop (SIGTERM) while its one worker slot runs a job
 * and more requests wait in line: the API drains while the worker of the same process still serves it,
 * so every request it accepted is answered whole, and the process exits 0 within the grace period.
 */
const MAIN = fileURLToPath(new URL("../../src/main.ts", import.meta.url));
const TOKENS = 8;

let db: TestDatabase;
let upstream: CountingUpstream;
let dir: string;
let child: ChildProcess | undefined;
const logs: string[] = [];

beforeAll(async () => {
  db = await createTestDatabase();
  upstream = await startCountingUpstream({ totalTokens: TOKENS, tokenDelayMs: 40, promptTokens: 10 });
  dir = await mkdtemp(path.join(tmpdir(), "colocated-shutdown-"));
}, 60_000);

afterAll(async () => {
  if (child && child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  await upstream?.close();
  await db?.drop();
  if (dir) await rm(dir, { recursive: true, force: true });
}, 60_000);

describe("npm start's shutdown with requests waiting in line", () => {
  it("answers every accepted request whole before it exits 0", async () => {
    const registry = path.join(dir, "registry.json");
    await writeFile(registry, JSON.stringify({ price_table_version: "test-1", models: [countingModel(upstream, { id: "slow-model", maxConcurrency: 1 })] }));
    const port = await freePort();
    const api = `http://127.0.0.1:${port}`;
    child = spawn(process.execPath, [MAIN], {
      env: {
        PATH: process.env.PATH ?? "",
        DATABASE_URL: db.url,
        REDIS_URL: TEST_REDIS_URL,
        REDIS_PREFIX: `test-shutdown-${process.pid}-${Date.now()}`,
        MODELS_CONFIG: registry,
        PORT: String(port),
        HOST: "127.0.0.1",
        METRICS_PORT: String(await freePort()),
        SHUTDOWN_GRACE_MS: "15000",
        LOG_LEVEL: "warn",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    child.stdout?.setEncoding("utf8").on("data", (text: string) => logs.push(text));
    child.stderr?.setEncoding("utf8").on("data", (text: string) => logs.push(text));
    const exited = new Promise<number | null>((resolve) => child!.once("exit", (code) => resolve(code)));
    await eventually(async () => ((await fetch(`${api}/v1/models`).catch(() => null))?.status === 403 ? true : undefined), 60_000).catch((error: unknown) => {
      throw new Error(`the service did not start: ${logs.join("")}`, { cause: error });
    });
    const account = await createTestAccount(db.pool, { monthlyBudgetChf: 100 });
    const { key } = await createKey({ request: requestVia(api) } as Parameters<typeof createKey>[0], account.sessionToken);
    const body = (i: number) => ({ model: "slow-model", messages: [{ role: "user", content: `Count ${i}.` }], max_tokens: TOKENS + 10 });
    // Four at once on one slot: one runs, three wait in line (each job takes about 0.4 s).
    const answers = Promise.all([0, 1, 2, 3].map((i) => chatThrough(api, key, body(i), i % 2 === 0, AbortSignal.timeout(30_000))));
    await eventually(async () => (upstream.requests.length >= 1 ? true : undefined), 10_000);
    const signalled = performance.now();
    child.kill("SIGTERM");
    const results = await answers;
    for (const result of results) {
      expect(result.status, result.text).toBe(200);
      expect(result.text).toBe(countingReply(TOKENS));
    }
    expect(await exited, logs.join("")).toBe(0);
    expect(performance.now() - signalled).toBeLessThan(15_000);
  }, 90_000);
});
