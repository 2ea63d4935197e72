import { type ChildProcess, spawn } from "node:child_process";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import { WorkerPresence } from "../../src/contracts/workerPresence.ts";
import { type CountingUpstream, startCountingUpstream, countingModel } from "../faults/countingUpstream.ts";
import { eventually } from "../support/eventually.ts";
import { type OtlpReceiver, startOtlpReceiver } from "../support/otlpReceiver.ts";
import { TEST_REDIS_URL } from "../support/testRedis.ts";
import { startTestPlatform, type TestPlatform } from "../support/testPlatform.ts";

// The trace of one request across processes as they run in production: the API and the worker each as
// `node --import src/observability/register.ts <entry point>`, exporting over OTLP/HTTP to a receiver
// started here; the engine an upstream stand-in that records the traceparent it is sent. (The key is
// created through the in-process test API on the same database.)
const REGISTER = fileURLToPath(new URL("../../src/observability/register.ts", import.meta.url));
const WORKER_MAIN = fileURLToPath(new URL("../../workers/main.ts", import.meta.url));
const API_MAIN = fileURLToPath(new URL("../../src/api/main.ts", import.meta.url));
const MODEL = "traced-upstream";
const PROMPT = "Count for me, quokka-saffron-lantern";
const OTLP_KIND = { internal: 1, server: 2, client: 3, producer: 4, consumer: 5 };
const API = "inference-platform-api";
const WORKER = "inference-platform-worker";

let receiver: OtlpReceiver;
let upstream: CountingUpstream;
let platform: TestPlatform;
const children: ChildProcess[] = [];
const childLog: string[] = [];
let apiUrl = "";

function spawnRole(main: string, env: Record<string, string | undefined>): ChildProcess {
  const child = spawn(process.execPath, ["--import", REGISTER, main], { env, stdio: ["ignore", "ignore", "pipe"] });
  child.stderr?.setEncoding("utf8").on("data", (text: string) => childLog.push(text));
  children.push(child);
  return child;
}

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  upstream = await startCountingUpstream({ totalTokens: 6, tokenDelayMs: 5, promptTokens: 9 });
  const model = countingModel(upstream, { id: MODEL, maxConcurrency: 4, continueFinalMessage: true });
  platform = await startTestPlatform({ startWorker: false, models: () => [model] });
  const env = {
    PATH: process.env.PATH,
    DATABASE_URL: platform.db.url,
    REDIS_URL: TEST_REDIS_URL,
    REDIS_PREFIX: platform.testRedis.prefix,
    MODELS_CONFIG: path.join(platform.dir, "registry.json"),
    WORKER_HEARTBEAT_MS: "500",
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
    LOG_LEVEL: "warn",
  };
  spawnRole(WORKER_MAIN, env);
  const port = await freePort();
  apiUrl = `http://127.0.0.1:${port}`;
  spawnRole(API_MAIN, { ...env, HOST: "127.0.0.1", PORT: String(port) });
  const presence = new WorkerPresence(platform.testRedis.redis, new InferenceKeys(platform.testRedis.prefix));
  await eventually(async () => ((await presence.isLive(MODEL)) && (await fetch(`${apiUrl}/v1/models`).catch(() => null)) ? true : undefined), 60_000).catch(
    (error: unknown) => {
      throw new Error(`the roles did not come up: ${childLog.join("")}`, { cause: error });
    },
  );
});

afterAll(async () => {
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGKILL");
      await exited(child);
    }
  }
  await platform?.close();
  await upstream?.close();
  await receiver?.close();
});

function exited(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve() : child.once("exit", () => resolve())));
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe("tracing across processes", () => {
  it("continues the API's trace in the worker process (job data) and in the upstream engine (traceparent header)", async () => {
    const { key, account } = await platform.createKey();
    const response = await fetch(`${apiUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: PROMPT }], max_tokens: 50 }),
    });
    expect(response.status).toBe(200);
    const body = (await response.json()) as { id: string; usage: { prompt_tokens: number; completion_tokens: number } };
    const traceId = response.headers.get("x-trace-id");
    expect(traceId).toMatch(/^[0-9a-f]{32}$/);

    expect((await fetch(`${apiUrl}/healthz`)).status).toBe(200);
    // A query's values (an email, a credential a client put in its URL) never reach a span: only the names.
    const queried = await fetch(`${apiUrl}/v1/models?api_key=${encodeURIComponent(key)}&email=ada%40example.com&limit=5`, {
      headers: { authorization: `Bearer ${key}` },
    });
    expect(queried.status).toBe(200);
    const queriedTrace = queried.headers.get("x-trace-id");
    // Nor a credential a client put in the path; the platform's own ids in paths stay.
    const keyInPath = await fetch(`${apiUrl}/v1/${key}`, { headers: { authorization: `Bearer ${key}` } });
    expect(keyInPath.status).toBe(404);
    // A key in a key-management path (a domain error, not an API error, carried it into exception events),
    // percent-encoded, and without its prefix as a model's name (found by a re-probe).
    const keyAsKeyId = await fetch(`${apiUrl}/api/v1/accounts/user/api-keys/${key}`, { headers: { authorization: `Bearer ${account.sessionToken}` } });
    expect(keyAsKeyId.status).toBe(404);
    const encoded = await fetch(`${apiUrl}/v1/sk%2D${key.slice(3)}`, { headers: { authorization: `Bearer ${key}` } });
    expect(encoded.status).toBe(404);
    expect(await encoded.text()).not.toContain(key.slice(3, 20));
    const asModel = await fetch(`${apiUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: key.slice(3), messages: [{ role: "user", content: "x" }] }),
    });
    expect(asModel.status).toBe(400);
    expect(await asModel.text()).not.toContain(key.slice(3, 20));
    const stored = await fetch(`${apiUrl}/v1/chat/completions/${body.id}`, { headers: { authorization: `Bearer ${key}` } });
    expect(stored.status).toBe(200);
    // The processes flush their spans when they stop (SIGTERM: the SDK's shutdown exports the batch).
    for (const child of children) {
      child.kill("SIGTERM");
      await exited(child);
      expect(child.exitCode, childLog.join("")).toBe(0);
    }

    const queriedServer = receiver.spans.find((s) => s.traceId === queriedTrace && s.kind === OTLP_KIND.server);
    expect(queriedServer?.attributes["url.query"]).toBe("api_key=REDACTED&email=REDACTED&limit=REDACTED");
    const serverPath = (response: Response) =>
      receiver.spans.find((s) => s.traceId === response.headers.get("x-trace-id") && s.kind === OTLP_KIND.server)?.attributes["url.path"];
    expect(serverPath(keyInPath)).toBe("/v1/REDACTED");
    expect(serverPath(stored)).toBe(`/v1/chat/completions/${body.id}`);
    const exported = JSON.stringify(receiver.spans.map((s) => s.attributes));
    expect(exported).not.toContain(key.slice(3, 20));
    // Nor in the exception events of the 404 it got (`Unknown request URL: GET /v1/sk-…`), nor anywhere else.
    for (const body of receiver.exports) expect(body).not.toContain(key.slice(3, 20));
    expect(exported).not.toContain("ada%40example.com");
    const all = receiver.spans.filter((s) => s.traceId === traceId);
    expect(new Set(all.map((s) => s.service))).toEqual(new Set([API, WORKER]));
    const one = (service: string, name: string) => {
      const found = all.filter((s) => s.service === service && s.name === name);
      expect(
        found.map((s) => s.name),
        name,
      ).toEqual([name]);
      return found[0]!;
    };

    // The API: the http instrumentation's server span (the root), named after the route template.
    const server = one(API, "POST /v1/chat/completions");
    expect(server.kind).toBe(OTLP_KIND.server);
    expect(server.scope).toBe("@opentelemetry/instrumentation-http");
    expect(server.parentSpanId).toBe("");
    expect(server.attributes["http.route"]).toBe("/v1/chat/completions");
    expect(response.headers.get("traceparent")).toBe(`00-${traceId}-${server.spanId}-01`);
    const enqueue = one(API, "enqueue RunCompletion");
    expect(enqueue.kind).toBe(OTLP_KIND.producer);
    // Under the server span, through Koa's router spans.
    const ancestors = (span: { parentSpanId: string }): string[] => {
      const parent = all.find((s) => s.spanId === span.parentSpanId);
      return parent ? [parent.name, ...ancestors(parent)] : [];
    };
    for (const span of [enqueue, one(API, "relay RunCompletion")]) {
      const chain = ancestors(span);
      expect(chain.at(-1)).toBe("POST /v1/chat/completions");
      expect(chain.slice(0, -1).every((name) => name.startsWith("router - "))).toBe(true);
    }
    const apiSpans = all.filter((s) => s.service === API);
    for (const scope of ["pg", "ioredis", "koa"])
      expect(
        apiSpans.some((s) => s.scope === `@opentelemetry/instrumentation-${scope}`),
        scope,
      ).toBe(true);

    // The worker: both its spans hang under the API's enqueue span, whose context travelled in the job data.
    const wait = one(WORKER, "queue wait");
    const run = one(WORKER, "RunCompletion");
    expect(wait.parentSpanId).toBe(enqueue.spanId);
    expect(run.parentSpanId).toBe(enqueue.spanId);
    expect(run.kind).toBe(OTLP_KIND.consumer);
    expect(wait.startNs).toBeGreaterThanOrEqual(enqueue.startNs);

    const engine = one(WORKER, `chat ${MODEL}`);
    expect(engine.parentSpanId).toBe(run.spanId);
    expect(engine.events).toContain("gen_ai.first_token");
    expect(engine.attributes).toMatchObject({
      "gen_ai.operation.name": "chat",
      "gen_ai.request.model": MODEL,
      "gen_ai.request.max_tokens": 50,
      "gen_ai.usage.input_tokens": body.usage.prompt_tokens,
      "gen_ai.usage.output_tokens": body.usage.completion_tokens,
      "gen_ai.response.finish_reasons": ["stop"],
    });
    expect(one(WORKER, "prefill").parentSpanId).toBe(engine.spanId);
    expect(one(WORKER, "decode").parentSpanId).toBe(engine.spanId);

    // The http instrumentation's client span of the upstream call, under the engine span; the upstream
    // received a traceparent of the same trace, naming that client span as its parent.
    const workerSpans = all.filter((s) => s.service === WORKER);
    const http = workerSpans.filter((s) => s.scope === "@opentelemetry/instrumentation-http" && s.kind === OTLP_KIND.client);
    expect(http.map((s) => s.parentSpanId)).toEqual([engine.spanId]);
    expect(upstream.requests.map((r) => r.traceparent)).toEqual([`00-${traceId}-${http[0]!.spanId}-01`]);
    // Database calls of the run appear as spans of the trace; the per-token Redis writes of the reply
    // (shared by many completions per event-loop turn) do not.
    expect(workerSpans.some((s) => s.scope === "@opentelemetry/instrumentation-pg")).toBe(true);
    expect(workerSpans.filter((s) => s.scope === "@opentelemetry/instrumentation-ioredis" && /^(xadd|expire|publish)$/i.test(s.name))).toEqual([]);

    // Probes make no trace.
    expect(receiver.spans.filter((s) => JSON.stringify([s.name, s.attributes]).includes("healthz"))).toEqual([]);

    // No prompt, reply or key anywhere: not in SQL, not in Redis commands (the job data), not in HTTP attributes.
    const everything = JSON.stringify(receiver.spans.map((s) => [s.name, s.attributes]));
    expect(everything).not.toContain("quokka-saffron");
    expect(everything).not.toContain(key.slice(3, 20));
    expect(everything).not.toContain("00 01 02");
  });
});
