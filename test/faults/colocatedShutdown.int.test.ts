import type { ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../support/eventually.ts";
import { createTestDatabase, type TestDatabase } from "../support/testDatabase.ts";
import { createTestRedis, type TestRedis } from "../support/testRedis.ts";
import { countingModel, countingReply, type CountingUpstream, startCountingUpstream } from "./countingUpstream.ts";
import { startNpmStartProcess } from "./npmStartProcess.ts";
import { chatThrough } from "./processChat.ts";

/**
 * `npm start` (every role in one process) told to stop (SIGTERM) while its one worker slot runs a job
 * and more requests wait in line: the API drains while the worker of the same process still serves it,
 * so every request it accepted is answered whole, and the process exits 0 within the grace period.
 */
const TOKENS = 8;

let db: TestDatabase;
let redis: TestRedis;
let upstream: CountingUpstream;
let dir: string;
let child: ChildProcess | undefined;

beforeAll(async () => {
  db = await createTestDatabase();
  redis = await createTestRedis();
  upstream = await startCountingUpstream({ totalTokens: TOKENS, tokenDelayMs: 40, promptTokens: 10 });
  dir = await mkdtemp(path.join(tmpdir(), "colocated-shutdown-"));
}, 60_000);

afterAll(async () => {
  if (child && child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  await upstream?.close();
  await db?.drop();
  await redis?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
}, 60_000);

describe("npm start's shutdown with requests waiting in line", () => {
  it("answers every accepted request whole before it exits 0", async () => {
    const started = await startNpmStartProcess({
      db,
      redis,
      dir,
      models: [countingModel(upstream, { id: "slow-model", maxConcurrency: 1 })],
      env: { SHUTDOWN_GRACE_MS: "15000" },
    });
    child = started.child;
    const { api, key, exited, logs } = started;
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
