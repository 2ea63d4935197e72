import { type ChildProcess, spawn } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../support/eventually.ts";
import { freePort } from "../support/freePort.ts";
import { createTestDatabase, type TestDatabase } from "../support/testDatabase.ts";
import { createTestRedis, TEST_REDIS_URL, type TestRedis } from "../support/testRedis.ts";

/**
 * The README's start command, `npm start`, told to stop by a SIGTERM to npm (a supervisor, a `kill` of
 * the PID it started): the service shuts down and its port is free. npm hands the signal to the
 * script's process, which must be the service itself, not a shell that dies and leaves it running.
 */
let db: TestDatabase;
let redis: TestRedis;
beforeAll(async () => {
  db = await createTestDatabase();
  redis = await createTestRedis();
}, 60_000);
afterAll(async () => {
  await db?.drop();
  await redis?.close();
}, 60_000);

/** `npm start` in a process group of its own, once it serves; its logs, and a promise of its exit. */
async function startNpm(): Promise<{ npm: ChildProcess; api: string; logs: string[]; exited: Promise<number | null> }> {
  const port = await freePort();
  const api = `http://127.0.0.1:${port}`;
  const logs: string[] = [];
  const npm = spawn("npm", ["start"], {
    env: {
      PATH: process.env.PATH ?? "",
      HOME: process.env.HOME ?? "/tmp",
      DATABASE_URL: db.url,
      REDIS_URL: TEST_REDIS_URL,
      REDIS_PREFIX: redis.prefix,
      PORT: String(port),
      HOST: "127.0.0.1",
      METRICS_PORT: String(await freePort()),
    },
    stdio: ["ignore", "pipe", "pipe"],
    // A process group of its own: whatever is left of it (a service npm failed to stop) is killed at the end.
    detached: true,
  });
  npm.stdout?.setEncoding("utf8").on("data", (text: string) => logs.push(text));
  npm.stderr?.setEncoding("utf8").on("data", (text: string) => logs.push(text));
  const exited = new Promise<number | null>((resolve) => npm.once("exit", (code) => resolve(code)));
  await eventually(async () => ((await fetch(`${api}/v1/models`).catch(() => null))?.status === 403 ? true : undefined), 90_000);
  // And its worker started: a signal to the whole group while the embedded engine still loads also
  // reaches the child process its binding check runs, and start-up fails instead of draining.
  await eventually(async () => (logs.join("").includes('"message":"worker ready"') ? true : undefined), 90_000);
  return { npm, api, logs, exited };
}

function killGroup(npm: ChildProcess): void {
  try {
    process.kill(-npm.pid!, "SIGKILL");
  } catch {
    // The group is gone: nothing was left.
  }
}

describe("npm start and SIGTERM", () => {
  it("stops the service when npm is told to stop", async () => {
    const { npm, api, logs, exited } = await startNpm();
    try {
      npm.kill("SIGTERM");
      await exited;
      // The service itself stopped (it logs so), and nothing serves the port any more.
      await eventually(async () => (logs.join("").includes('"message":"stopped"') ? true : undefined), 15_000).catch((error: unknown) => {
        throw new Error(`the service did not stop: ${logs.join("").slice(-2000)}`, { cause: error });
      });
      await eventually(async () => ((await fetch(`${api}/v1/models`).catch(() => null)) === null ? true : undefined), 15_000);
      expect(logs.join("")).toContain('"signal":"SIGTERM"');
    } finally {
      killGroup(npm);
    }
  }, 150_000);

  it("drains, not cuts, when the whole process group is signalled (Ctrl-C in a terminal: npm passes its signal on)", async () => {
    const { npm, logs, exited } = await startNpm();
    try {
      process.kill(-npm.pid!, "SIGINT");
      await exited;
      await eventually(async () => (logs.join("").includes('"message":"stopped"') ? true : undefined), 15_000).catch((error: unknown) => {
        throw new Error(`the service did not stop by draining: ${logs.join("").slice(-2000)}`, { cause: error });
      });
      expect(logs.join("")).not.toContain("second signal");
    } finally {
      killGroup(npm);
    }
  }, 150_000);
});
