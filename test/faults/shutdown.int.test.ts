import { spawn } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../support/testDatabase.ts";

/**
 * SIGTERM drains the roles; a role that does not finish within SHUTDOWN_GRACE_MS is cut: the process
 * logs what was cut and exits 1 instead of hanging.
 */
let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});

const SCRIPT = new URL("../support/slowRoleProcess.ts", import.meta.url).pathname;

async function terminate(stopMs: string, graceMs: number): Promise<{ code: number | null; ms: number; log: string }> {
  const child = spawn(process.execPath, [SCRIPT], {
    env: { ...process.env, DATABASE_URL: db.url, SHUTDOWN_GRACE_MS: String(graceMs), STOP_MS: stopMs, LOG_LEVEL: "info" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let log = "";
  child.stderr.on("data", (chunk: Buffer) => {
    log += chunk.toString();
  });
  // "close": after the exit and the end of its output.
  const exited = new Promise<number | null>((resolve) => child.once("close", (code) => resolve(code)));
  try {
    await new Promise<void>((resolve, reject) => {
      child.stdout.on("data", (chunk: Buffer) => chunk.toString().includes("started") && resolve());
      exited.then((code) => reject(new Error(`exited (${code}) before it started: ${log}`)));
    });
    const signalled = performance.now();
    child.kill("SIGTERM");
    const code = await exited;
    return { code, ms: performance.now() - signalled, log };
  } finally {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  }
}

describe("graceful shutdown", () => {
  it("exits 0 once the roles have drained within the grace period", async () => {
    const result = await terminate("100", 5000);
    expect(result.code, result.log).toBe(0);
    expect(result.log).toContain('"message":"stopped"');
  });

  it("cuts a role that does not finish within SHUTDOWN_GRACE_MS, says so and exits 1", async () => {
    const result = await terminate("never", 300);
    expect(result.code, result.log).toBe(1);
    expect(result.ms).toBeLessThan(3000);
    const line = result.log.split("\n").find((l) => l.includes("shutdown grace period exceeded"));
    expect(line, result.log).toBeDefined();
    expect(JSON.parse(line!)).toMatchObject({ level: "error", graceMs: 300, cut: ["slow", "postgres pools", "telemetry"] });
  });
});
