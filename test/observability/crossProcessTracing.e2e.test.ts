import { type ChildProcess, spawn } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import { WorkerPresence } from "../../src/contracts/workerPresence.ts";
import type { ModelEntry } from "../../src/models/modelRegistrySchema.ts";
import { startTelemetry, type Telemetry } from "../../src/observability/telemetry.ts";
import { type CountingUpstream, startCountingUpstream } from "../faults/countingUpstream.ts";
import { eventually } from "../support/eventually.ts";
import { type OtlpReceiver, startOtlpReceiver } from "../support/otlpReceiver.ts";
import { TEST_REDIS_URL } from "../support/testRedis.ts";
import { startTestPlatform, type TestPlatform } from "../support/testPlatform.ts";

// The trace of one request across two OS processes: the API in this process (in-memory exporter), the
// worker as `node --import src/observability/register.ts workers/main.ts` exporting over OTLP/HTTP to a
// receiver started here, the engine an upstream stand-in that records the traceparent it is sent.
const REGISTER = fileURLToPath(new URL("../../src/observability/register.ts", import.meta.url));
const WORKER_MAIN = fileURLToPath(new URL("../../workers/main.ts", import.meta.url));
const MODEL = "traced-upstream";
const PROMPT = "Count for me, quokka-saffron-lantern";
const OTLP_KIND = { internal: 1, server: 2, client: 3, producer: 4, consumer: 5 };

const exporter = new InMemorySpanExporter();
let telemetry: Telemetry;
let receiver: OtlpReceiver;
let upstream: CountingUpstream;
let platform: TestPlatform;
let worker: ChildProcess | null = null;
const workerLog: string[] = [];

beforeAll(async () => {
  telemetry = startTelemetry({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });
  receiver = await startOtlpReceiver();
  upstream = await startCountingUpstream({ totalTokens: 6, tokenDelayMs: 5, promptTokens: 9 });
  const model: ModelEntry = {
    id: MODEL,
    owned_by: "test-lab",
    engine: { type: "upstream", baseUrl: upstream.baseUrl, model: "counting", continueFinalMessage: true, maxConcurrency: 4 },
    capabilities: { chat: true, completions: true, embeddings: false, tools: false, json_schema: false, logprobs: false, reasoning: false },
    context_length: 8192,
    pricing: { input_per_million_chf: 1, output_per_million_chf: 2 },
  };
  platform = await startTestPlatform({ startWorker: false, models: () => [model] });
  worker = spawn(process.execPath, ["--import", REGISTER, WORKER_MAIN], {
    env: {
      PATH: process.env.PATH,
      DATABASE_URL: platform.db.url,
      REDIS_URL: TEST_REDIS_URL,
      REDIS_PREFIX: platform.testRedis.prefix,
      MODELS_CONFIG: path.join(platform.dir, "registry.json"),
      WORKER_HEARTBEAT_MS: "500",
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
      LOG_LEVEL: "warn",
    },
    stdio: ["ignore", "ignore", "pipe"],
  });
  worker.stderr?.setEncoding("utf8").on("data", (text: string) => workerLog.push(text));
  const presence = new WorkerPresence(platform.testRedis.redis, new InferenceKeys(platform.testRedis.prefix));
  await eventually(async () => ((await presence.isLive(MODEL)) ? true : undefined), 60_000).catch((error: unknown) => {
    throw new Error(`the worker did not come up: ${workerLog.join("")}`, { cause: error });
  });
});

afterAll(async () => {
  if (worker && worker.exitCode === null && worker.signalCode === null) {
    worker.kill("SIGKILL");
    await exited(worker);
  }
  await platform?.close();
  await upstream?.close();
  await receiver?.close();
  await telemetry?.shutdown();
});

function exited(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve() : child.once("exit", () => resolve())));
}

describe("tracing across processes", () => {
  it("continues the API's trace in the worker process (job data) and in the upstream engine (traceparent header)", async () => {
    const { key } = await platform.createKey();
    const response = await fetch(`${platform.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: PROMPT }], max_tokens: 50 }),
    });
    expect(response.status).toBe(200);
    const body = (await response.json()) as { id: string; usage: { prompt_tokens: number; completion_tokens: number } };
    const traceId = response.headers.get("x-trace-id");
    expect(traceId).toMatch(/^[0-9a-f]{32}$/);

    // The worker flushes its spans when it stops (SIGTERM: the SDK's shutdown exports the batch).
    worker!.kill("SIGTERM");
    await exited(worker!);
    expect(worker!.exitCode, workerLog.join("")).toBe(0);

    const api = exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === traceId);
    const server = api.find((s) => s.name === "POST /v1/chat/completions")!;
    const enqueue = api.find((s) => s.name === "enqueue RunCompletion")!;
    expect(enqueue.parentSpanContext?.spanId).toBe(server.spanContext().spanId);

    const spans = receiver.spans.filter((s) => s.traceId === traceId);
    expect(new Set(spans.map((s) => s.service))).toEqual(new Set(["inference-platform-worker"]));
    const one = (name: string) => {
      const found = spans.filter((s) => s.name === name);
      expect(
        found.map((s) => s.name),
        name,
      ).toEqual([name]);
      return found[0]!;
    };
    // Both worker spans hang under the API's enqueue span: its context travelled in the job data.
    const wait = one("queue wait");
    const run = one("RunCompletion");
    expect(wait.parentSpanId).toBe(enqueue.spanContext().spanId);
    expect(run.parentSpanId).toBe(enqueue.spanContext().spanId);
    expect(run.kind).toBe(OTLP_KIND.consumer);
    expect(wait.endNs).toBeLessThanOrEqual(run.startNs + 5_000_000n);

    const engine = one(`chat ${MODEL}`);
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
    expect(one("prefill").parentSpanId).toBe(engine.spanId);
    expect(one("decode").parentSpanId).toBe(engine.spanId);

    // The http instrumentation's client span of the upstream call, under the engine span; the upstream
    // received a traceparent of the same trace, naming that client span as its parent.
    const http = spans.filter((s) => s.scope === "@opentelemetry/instrumentation-http" && s.kind === OTLP_KIND.client);
    expect(http.map((s) => s.parentSpanId)).toEqual([engine.spanId]);
    expect(upstream.requests.map((r) => r.traceparent)).toEqual([`00-${traceId}-${http[0]!.spanId}-01`]);

    // Database and Redis calls of the run appear as spans of the trace.
    expect(spans.some((s) => s.scope === "@opentelemetry/instrumentation-pg")).toBe(true);
    expect(spans.some((s) => s.scope === "@opentelemetry/instrumentation-ioredis")).toBe(true);

    const everything = JSON.stringify([...spans.map((s) => s.attributes), ...api.map((s) => s.attributes)]);
    expect(everything).not.toContain("quokka-saffron");
    expect(everything).not.toContain(key.slice(3, 20));
    expect(everything).not.toContain("00 01 02");
  });
});
