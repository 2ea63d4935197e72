import { spawn, type ChildProcess } from "node:child_process";
import { createServer } from "node:http";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createMetrics } from "../../src/observability/metrics.ts";
import { startMetricsServer } from "../../src/observability/metricsServer.ts";
import { allProjections } from "../../projections/allProjections.ts";
import { eventually } from "../support/eventually.ts";
import { freePort } from "../support/freePort.ts";
import { sampleValue, scrape } from "../support/prometheusText.ts";
import { TEST_REDIS_URL } from "../support/testRedis.ts";
import { startTestPlatform, TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";

const MAIN = fileURLToPath(new URL("../../src/main.ts", import.meta.url));

function exited(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve() : child.once("exit", () => resolve())));
}

describe("METRICS_PORT: the worker and the projector in one process (npm start --role worker --role projector)", () => {
  let platform: TestPlatform;
  let child: ChildProcess;
  let metricsUrl: string;
  const logs: string[] = [];

  beforeAll(async () => {
    // The API in this process; the worker and projector roles in a child process of their own.
    platform = await startTestPlatform({ startWorker: false });
    const port = await freePort();
    metricsUrl = `http://127.0.0.1:${port}/metrics`;
    child = spawn(process.execPath, [MAIN, "--role", "worker", "--role", "projector"], {
      env: {
        PATH: process.env.PATH,
        DATABASE_URL: platform.db.url,
        REDIS_URL: TEST_REDIS_URL,
        REDIS_PREFIX: platform.testRedis.prefix,
        MODELS_CONFIG: path.join(platform.dir, "registry.json"),
        WORKER_HEARTBEAT_MS: "500",
        PROJECTOR_POLL_MS: "20",
        HOST: "127.0.0.1",
        METRICS_PORT: String(port),
        LOG_LEVEL: "error",
      },
      stdio: ["ignore", "ignore", "pipe"],
    });
    child.stderr?.setEncoding("utf8").on("data", (text: string) => logs.push(text));
  }, 60_000);

  afterAll(async () => {
    if (child && child.exitCode === null) {
      child.kill("SIGTERM");
      await exited(child);
    }
    await platform?.close();
  });

  it("serves both roles' metrics and Node's process metrics on one listener, and counts a job run through the API", async () => {
    const ready = await eventually(async () => {
      const s = await scrape(metricsUrl).catch(() => undefined);
      const projecting = s && allProjections.every((p) => sampleValue(s.samples, "projector_lag_events", { projection: p.name }) !== undefined);
      return s && projecting && sampleValue(s.samples, "inference_worker_slots", { model: TINY_CHAT }) === 2 ? s : undefined;
    }, 60_000).catch((error: unknown) => {
      throw new Error(`${(error as Error).message}; child stderr: ${logs.join("")}`);
    });
    expect(ready.contentType).toMatch(/^text\/plain; version=0\.0\.4/);
    for (const projection of allProjections)
      expect(sampleValue(ready.samples, "projector_lag_events", { projection: projection.name })).toBeGreaterThanOrEqual(0);
    expect(sampleValue(ready.samples, "process_cpu_user_seconds_total")).toBeGreaterThan(0);
    expect(sampleValue(ready.samples, "nodejs_eventloop_lag_seconds")).toBeGreaterThanOrEqual(0);
    expect(sampleValue(ready.samples, "pg_pool_connections", { pool: "background" })).toBeGreaterThan(0);
    expect(sampleValue(ready.samples, "redis_connection_ready", { connection: "worker" })).toBe(1);

    const { key } = await platform.createKey();
    await eventually(async () => ((await platform.inference.presence.isLive(TINY_CHAT)) ? true : undefined));
    const reply = await platform.request("POST", "/v1/chat/completions", {
      token: key,
      body: { model: TINY_CHAT, messages: [{ role: "user", content: "Hi" }], max_tokens: 4 },
    });
    expect(reply.status).toBe(200);

    const after = await eventually(async () => {
      const s = await scrape(metricsUrl);
      return sampleValue(s.samples, "inference_jobs_completed_total", { model: TINY_CHAT }) === 1 ? s : undefined;
    });
    expect(sampleValue(after.samples, "inference_jobs_started_total", { model: TINY_CHAT, mode: "new" })).toBe(1);
    expect(sampleValue(after.samples, "inference_queue_wait_seconds_count", { model: TINY_CHAT })).toBe(1);
    expect(sampleValue(after.samples, "inference_input_tokens_total", { model: TINY_CHAT })).toBe(reply.body.usage.prompt_tokens);
    expect(sampleValue(after.samples, "inference_output_tokens_total", { model: TINY_CHAT })).toBe(reply.body.usage.completion_tokens);
    // The API runs in this test's process: its HTTP metrics are not on the worker/projector listener.
    expect(sampleValue(after.samples, "http_server_requests_total")).toBeUndefined();
  }, 120_000);

  it("answers 404 to anything but GET /metrics", async () => {
    const port = new URL(metricsUrl).port;
    expect((await fetch(`http://127.0.0.1:${port}/`)).status).toBe(404);
    expect((await fetch(`http://127.0.0.1:${port}/metrics`, { method: "POST" })).status).toBe(404);
  });
});

describe("startMetricsServer", () => {
  it("serves the registry on GET and HEAD /metrics, and closes", async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    metrics.auth.refusals.inc({ reason: "missing_api_key" });
    const server = await startMetricsServer(metrics, { port: 0, host: "127.0.0.1" });
    try {
      const s = await scrape(`http://127.0.0.1:${server.port}/metrics?x=1`);
      expect(s.status).toBe(200);
      expect(sampleValue(s.samples, "auth_refusals_total", { reason: "missing_api_key" })).toBe(1);
      const head = await fetch(`http://127.0.0.1:${server.port}/metrics`, { method: "HEAD" });
      expect(head.status).toBe(200);
      expect(await head.text()).toBe("");
    } finally {
      await server.close();
    }
    await expect(fetch(`http://127.0.0.1:${server.port}/metrics`)).rejects.toThrow();
  });
});

describe("npm start's default metrics port taken by another process of the host", () => {
  it("leaves the port to the other process and runs on (an explicitly set METRICS_PORT must still bind)", async () => {
    const platform = await startTestPlatform({ startWorker: false });
    // Hold 9464 (npm start's default) unless something else on this host already does.
    const holder = createServer((_req, res) => res.end("someone else"));
    await new Promise<void>((resolve) => {
      holder.once("error", () => resolve());
      holder.listen(9464, "127.0.0.1", () => resolve());
    });
    const env = {
      PATH: process.env.PATH,
      DATABASE_URL: platform.db.url,
      REDIS_URL: TEST_REDIS_URL,
      REDIS_PREFIX: platform.testRedis.prefix,
      MODELS_CONFIG: path.join(platform.dir, "registry.json"),
      PROJECTOR_POLL_MS: "50",
      HOST: "127.0.0.1",
      LOG_LEVEL: "warn",
    };
    const children: ChildProcess[] = [];
    try {
      const logs: string[] = [];
      const child = spawn(process.execPath, [MAIN, "--role", "projector"], { env, stdio: ["ignore", "ignore", "pipe"] });
      children.push(child);
      child.stderr?.setEncoding("utf8").on("data", (text: string) => logs.push(text));
      await eventually(async () => (logs.join("").includes("the default metrics port is taken") ? true : undefined), 30_000);
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(child.exitCode).toBeNull();
      // The same port set explicitly is an error at start.
      const explicit = spawn(process.execPath, [MAIN, "--role", "projector"], { env: { ...env, METRICS_PORT: "9464" }, stdio: "ignore" });
      children.push(explicit);
      await exited(explicit);
      expect(explicit.exitCode).not.toBe(0);
    } finally {
      for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      await Promise.all(children.map(exited));
      await new Promise<void>((resolve) => holder.close(() => resolve()));
      await platform.close();
    }
  }, 60_000);
});
