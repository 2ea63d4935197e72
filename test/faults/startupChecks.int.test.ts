import { spawn } from "node:child_process";
import { createServer, type Server, type Socket } from "node:net";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkPostgres, checkRedis, DependencyUnavailableError } from "../../src/runtime/checkDependencies.ts";
import { freePort } from "../support/freePort.ts";
import { createTestDatabase, type TestDatabase } from "../support/testDatabase.ts";
import { TEST_REDIS_URL } from "../support/testRedis.ts";

/**
 * The start-up checks against a dependency that accepts connections and never says a word (a wrong
 * port forwarded to something silent, a frozen server): each fails within its 3 s deadline, naming the
 * dependency, instead of waiting for ever.
 */
let silent: Server;
let port: number;
const sockets = new Set<Socket>();

beforeAll(async () => {
  silent = createServer((socket) => {
    sockets.add(socket);
    socket.on("error", () => undefined);
  });
  await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
  port = (silent.address() as { port: number }).port;
});
afterAll(async () => {
  for (const socket of sockets) socket.destroy();
  await new Promise((resolve) => silent.close(resolve));
});

describe("start-up checks against a silent server", () => {
  it("fails the Redis check within about 3 s, saying Redis does not answer", async () => {
    const started = performance.now();
    const error = await checkRedis(`redis://127.0.0.1:${port}`).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DependencyUnavailableError);
    expect((error as Error).message).toMatch(/^Redis is not answering at redis:\/\/127\.0\.0\.1:\d+\/? \(no answer within 3 s\)/);
    expect(performance.now() - started).toBeLessThan(6_000);
  }, 15_000);

  it("fails the PostgreSQL check within about 3 s, saying PostgreSQL does not answer", async () => {
    const started = performance.now();
    const error = await checkPostgres(`postgres://postgres@127.0.0.1:${port}/nothing`).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DependencyUnavailableError);
    expect((error as Error).message).toMatch(/^PostgreSQL is not answering/);
    expect(performance.now() - started).toBeLessThan(6_000);
  }, 15_000);
});

const MAIN = fileURLToPath(new URL("../../src/main.ts", import.meta.url));

/** `npm start --role <role>` with these settings: its exit code and what it wrote to stderr. */
async function startFails(role: string, env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(process.execPath, [MAIN, "--role", role], {
    env: { PATH: process.env.PATH ?? "", REDIS_URL: TEST_REDIS_URL, HOST: "127.0.0.1", LOG_LEVEL: "warn", ...env },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (text: string) => {
    stderr += text;
  });
  const timer = setTimeout(() => child.kill("SIGKILL"), 20_000);
  const code = await new Promise<number | null>((resolve) => child.once("close", resolve));
  clearTimeout(timer);
  return { code, stderr };
}

describe("start-up mistakes of the configuration: one line, no stack", () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  it("names a port another process holds, and a model registry that cannot be read", async () => {
    const taken = await startFails("projector", { DATABASE_URL: db.url, METRICS_PORT: String(port) });
    expect(taken.code).toBe(1);
    expect(taken.stderr.trim().split("\n")).toEqual([expect.stringMatching(/EADDRINUSE.*another process holds this port: set PORT \(or METRICS_PORT\)/)]);
    const registry = await startFails("api", {
      DATABASE_URL: db.url,
      PORT: String(await freePort()),
      METRICS_PORT: String(await freePort()),
      MODELS_CONFIG: "/nonexistent/registry.json",
    });
    expect(registry.code).toBe(1);
    expect(registry.stderr.trim().split("\n")).toEqual([
      expect.stringMatching(/^start-up failed: Cannot read the model registry \/nonexistent\/registry\.json.*\(MODELS_CONFIG\)\.$/),
    ]);
  }, 60_000);

  it("names WORKER_MODELS that the registry lacks, and an AUDIT_SIGNING_KEY_PATH that cannot be read (they printed stacks)", async () => {
    const worker = await startFails("worker", { DATABASE_URL: db.url, METRICS_PORT: String(await freePort()), WORKER_MODELS: "no-such-model" });
    expect(worker.code).toBe(1);
    expect(worker.stderr.trim().split("\n")).toEqual(["start-up failed: WORKER_MODELS names models the registry does not have: no-such-model."]);
    const projector = await startFails("projector", {
      DATABASE_URL: db.url,
      METRICS_PORT: String(await freePort()),
      AUDIT_SIGNING_KEY_PATH: "/nonexistent.pem",
    });
    expect(projector.code).toBe(1);
    expect(projector.stderr.trim().split("\n")).toEqual([expect.stringMatching(/^start-up failed: AUDIT_SIGNING_KEY_PATH: ENOENT.*nonexistent\.pem.*\.$/)]);
  }, 60_000);
});
