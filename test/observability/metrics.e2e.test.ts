import Router from "@koa/router";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { routeFactories } from "../../src/api/routes.ts";
import { randomUUID } from "node:crypto";
import { loadConfig } from "../../src/config/config.ts";
import { LocalReplyChannels } from "../../src/contracts/localReplyChannels.ts";
import { placeHold } from "../../src/ledger/budget/placeHold.ts";
import { silentLogger } from "../../src/observability/logger.ts";
import type { RunningRole } from "../../src/runtime/role.ts";
import { startProjector } from "../../projections/startProjector.ts";
import { allProjections } from "../../projections/allProjections.ts";
import { eventually } from "../support/eventually.ts";
import { type Sample, sampleValue, scrape } from "../support/prometheusText.ts";
import { startTestApp } from "../support/testApp.ts";
import { startTestPlatform, TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";
import { setBudget } from "../usage/usageFixtures.ts";

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/i;

describe("GET /metrics after a known workload (real API, queue, worker and embedded engine)", () => {
  let platform: TestPlatform;
  let projector: RunningRole | null = null;
  let samples: Sample[];
  let metricsText: string;
  const secrets: string[] = [];
  const usages: { prompt: number; completion: number }[] = [];

  beforeAll(async () => {
    platform = await startTestPlatform({ env: { METRICS_ON_API_PORT: "true" } });
    platform.deps.metrics.sources.addPool("api", platform.deps.pool);
    const { key, keyId, account } = await platform.createKey();
    const refused = await platform.createKey();
    await setBudget(platform.deps.pool, refused.account.accountId, 1);
    secrets.push(key, keyId, account.accountId, refused.key, refused.keyId, refused.account.accountId);
    const client = platform.openai(key);
    const messages = [{ role: "user" as const, content: "Say something." }];

    // Workload: 2 chat requests, 1 streamed; 1 refused by the budget; 2 refused keys; 1 unknown URL; 1 key read.
    for (let i = 0; i < 2; i++) {
      const reply = await client.chat.completions.create({ model: TINY_CHAT, messages, max_tokens: 6 });
      secrets.push(reply.id);
      usages.push({ prompt: reply.usage!.prompt_tokens, completion: reply.usage!.completion_tokens });
    }
    const stream = await client.chat.completions.create({ model: TINY_CHAT, messages, max_tokens: 6, stream: true, stream_options: { include_usage: true } });
    for await (const chunk of stream) {
      secrets.push(chunk.id);
      if (chunk.usage) usages.push({ prompt: chunk.usage.prompt_tokens, completion: chunk.usage.completion_tokens });
    }
    const overBudget = await platform.request("POST", "/v1/chat/completions", { token: refused.key, body: { model: TINY_CHAT, messages, max_tokens: 6 } });
    expect(overBudget.status).toBe(429);
    expect((await platform.request("POST", "/v1/chat/completions", { body: { model: TINY_CHAT, messages } })).status).toBe(403);
    const badKey = `${key.slice(0, -4)}xxxx`;
    secrets.push(badKey);
    expect((await platform.request("POST", "/v1/chat/completions", { token: badKey, body: { model: TINY_CHAT, messages } })).status).toBe(403);
    expect((await platform.request("GET", `/v1/nothing/${keyId}`, { token: key })).status).toBe(404);
    expect((await platform.request("GET", `/api/v1/accounts/user/api-keys/${keyId}`, { token: account.sessionToken })).status).toBe(200);

    // Every hold settled; then the projector role (same registry) catches up and sweeps one orphaned hold.
    await eventually(async () => {
      const holds = await platform.deps.pool.query("SELECT count(*)::int AS n FROM budget_holds");
      return holds.rows[0].n === 0 ? true : undefined;
    });
    const orphan = await placeHold(platform.deps.pool, {
      holdId: randomUUID(),
      accountId: account.accountId,
      amountMicroChf: 5,
      now: new Date(Date.now() - 5000),
    });
    expect(orphan.ok).toBe(true);
    const config = { ...platform.deps.config, budgetSweepIntervalMs: 100, budgetHoldMaxAgeMs: 1000, projectorPollMs: 20 };
    projector = await startProjector({
      config,
      pool: platform.deps.pool,
      logger: silentLogger,
      metrics: platform.deps.metrics,
      localReplies: new LocalReplyChannels(),
    });

    const final = await eventually(async () => {
      const s = await scrape(`${platform.baseUrl}/metrics`);
      const caughtUp = allProjections.every((p) => sampleValue(s.samples, "projector_lag_events", { projection: p.name }) === 0);
      const swept = sampleValue(s.samples, "budget_holds_released_total", { by: "sweeper" }) === 1;
      const jobsDone = sampleValue(s.samples, "inference_jobs_completed_total", { model: TINY_CHAT }) === 3;
      return caughtUp && swept && jobsDone ? s : undefined;
    });
    expect(final.status).toBe(200);
    expect(final.contentType).toMatch(/^text\/plain; version=0\.0\.4/);
    samples = final.samples;
    metricsText = final.text;
  }, 120_000);

  afterAll(async () => {
    await projector?.stop();
    await platform?.close();
  });

  const value = (name: string, labels: Record<string, string> = {}) => sampleValue(samples, name, labels);

  it("counts HTTP requests by route template and status, with durations", () => {
    const chat = { method: "POST", route: "/v1/chat/completions" };
    expect(value("http_server_requests_total", { ...chat, status: "200" })).toBe(3);
    expect(value("http_server_requests_total", { ...chat, status: "429" })).toBe(1);
    expect(value("http_server_requests_total", { ...chat, status: "403" })).toBe(2);
    expect(value("http_server_request_duration_seconds_count", { ...chat, status: "200" })).toBe(3);
    expect(value("http_server_request_duration_seconds_sum", { ...chat, status: "200" })).toBeGreaterThan(0);
    expect(value("http_server_requests_total", { method: "GET", route: "/api/v1/accounts/user/api-keys/:keyId", status: "200" })).toBe(1);
    expect(value("http_server_requests_total", { method: "POST", route: "/api/v1/accounts/user/api-keys/create", status: "201" })).toBe(2);
    expect(value("http_server_requests_total", { method: "GET", route: "unmatched", status: "404" })).toBe(1);
  });

  it("counts the jobs, their queue wait and the worker's slots by model", () => {
    const model = { model: TINY_CHAT };
    expect(value("inference_jobs_started_total", { ...model, mode: "new" })).toBe(3);
    expect(value("inference_jobs_started_total", { ...model, mode: "redelivered" })).toBeUndefined();
    expect(value("inference_jobs_completed_total", model)).toBe(3);
    expect(value("inference_jobs_failed_total", model)).toBeUndefined();
    expect(value("inference_jobs_stalled_total", model)).toBeUndefined();
    expect(value("inference_queue_wait_seconds_count", model)).toBe(3);
    expect(value("inference_worker_slots", model)).toBe(2);
    expect(value("inference_worker_slots_busy", model)).toBe(0);
    expect(value("inference_queue_jobs", { ...model, state: "waiting" })).toBe(0);
    expect(value("inference_queue_jobs", { ...model, state: "active" })).toBe(0);
  });

  it("measures the engine: tokens in and out, time to first token, inter-token latency and decode speed", () => {
    const model = { model: TINY_CHAT };
    expect(usages).toHaveLength(3);
    expect(value("inference_input_tokens_total", model)).toBe(usages.reduce((n, u) => n + u.prompt, 0));
    expect(value("inference_output_tokens_total", model)).toBe(usages.reduce((n, u) => n + u.completion, 0));
    const generating = usages.filter((u) => u.completion > 0).length;
    expect(generating).toBeGreaterThan(0);
    expect(value("inference_time_to_first_token_seconds_count", model)).toBe(generating);
    expect(value("inference_inter_token_latency_seconds_count", model)).toBeGreaterThan(0);
    expect(value("inference_engine_output_tokens_per_second_count", model)).toBeGreaterThan(0);
    expect(value("inference_engine_errors_total", model)).toBeUndefined();
  });

  it("counts budget holds placed, refused by reason and released by the sweeper; auth refusals by reason", () => {
    expect(value("budget_holds_placed_total")).toBe(3);
    expect(value("budget_holds_refused_total", { status: "429", reason: "monthly_budget_exceeded" })).toBe(1);
    expect(value("budget_holds_refused_total", { status: "402" })).toBeUndefined();
    expect(value("budget_holds_released_total", { by: "sweeper" })).toBe(1);
    expect(value("budget_holds_released_total", { by: "admission" })).toBeUndefined();
    expect(value("auth_refusals_total", { reason: "missing_api_key" })).toBe(1);
    expect(value("auth_refusals_total", { reason: "malformed_api_key" })).toBe(1);
    expect(value("auth_refusals_total", { reason: "unknown_or_revoked_api_key" })).toBeUndefined();
  });

  it("reports projector lag, pools and Redis connections", () => {
    for (const projection of allProjections) {
      expect(value("projector_lag_events", { projection: projection.name })).toBe(0);
      expect(value("projector_lag_seconds", { projection: projection.name })).toBe(0);
    }
    expect(value("pg_pool_connections", { pool: "api" })).toBeGreaterThan(0);
    expect(value("pg_pool_waiting_clients", { pool: "api" })).toBe(0);
    expect(value("pg_pool_connections", { pool: "api-holds" })).toBeGreaterThan(0);
    expect(value("pg_pool_idle_connections", { pool: "worker-folds" })).toBeGreaterThanOrEqual(0);
    expect(value("redis_connection_ready", { connection: "worker" })).toBe(1);
  });

  it("never puts a key, account, completion id or raw path in a label", () => {
    expect(secrets.length).toBeGreaterThan(8);
    for (const sample of samples) {
      for (const labelValue of Object.values(sample.labels)) {
        expect(labelValue).not.toMatch(UUID);
        expect(labelValue).not.toMatch(/chatcmpl|^sk-|\/v1\/nothing/);
      }
    }
    for (const secret of new Set(secrets)) expect(metricsText).not.toContain(secret);
  });
});

describe("a client that leaves before the response begins", () => {
  it("is counted with status 499 under its route template, not Koa's placeholder 404", async () => {
    let arrived!: () => void;
    const reached = new Promise<void>((resolve) => {
      arrived = resolve;
    });
    const slowRoutes = () => {
      const router = new Router();
      router.get("/slow/:thing", async (ctx) => {
        arrived();
        await new Promise((resolve) => ctx.req.once("close", resolve));
        ctx.body = { late: true };
      });
      return router;
    };
    const app = await startTestApp({ routes: [...routeFactories, slowRoutes], env: { METRICS_ON_API_PORT: "true" } });
    try {
      const abort = new AbortController();
      const request = fetch(`${app.baseUrl}/slow/${randomUUID()}`, { signal: abort.signal }).catch((error: unknown) => error);
      await reached;
      abort.abort();
      expect(await request).toBeInstanceOf(Error);
      const counted = await eventually(async () => {
        const s = await scrape(`${app.baseUrl}/metrics`);
        return sampleValue(s.samples, "http_server_requests_total", { route: "/slow/:thing" }) ? s : undefined;
      });
      expect(sampleValue(counted.samples, "http_server_requests_total", { method: "GET", route: "/slow/:thing", status: "499" })).toBe(1);
      expect(sampleValue(counted.samples, "http_server_requests_total", { route: "/slow/:thing", status: "404" })).toBeUndefined();
    } finally {
      await app.close();
    }
  });
});

describe("METRICS_ON_API_PORT", () => {
  it("is false by default: /metrics is not on the API's public port (404 in the OpenAI error shape)", async () => {
    const app = await startTestApp();
    try {
      const response = await app.request("GET", "/metrics");
      expect(response.status).toBe(404);
      expect(response.body.error.code).toBe("unknown_url");
    } finally {
      await app.close();
    }
  });

  it("is read from the environment as true or false only; METRICS_PORT must be a port", () => {
    expect(loadConfig({}).metrics).toEqual({ port: undefined, onApiPort: false });
    expect(loadConfig({ METRICS_ON_API_PORT: "true" }).metrics).toEqual({ port: undefined, onApiPort: true });
    expect(loadConfig({ METRICS_PORT: "9464" }).metrics).toEqual({ port: 9464, onApiPort: false });
    expect(() => loadConfig({ METRICS_ON_API_PORT: "no" })).toThrow(/METRICS_ON_API_PORT: expected "true" or "false"/);
    expect(() => loadConfig({ METRICS_PORT: "70000" })).toThrow(/METRICS_PORT/);
  });
});
