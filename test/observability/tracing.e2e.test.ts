import { SpanKind } from "@opentelemetry/api";
import { InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor } from "@opentelemetry/sdk-trace";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTelemetry, type Telemetry } from "../../src/observability/telemetry.ts";
import { eventually } from "../support/eventually.ts";
import { type CountingUpstream, startCountingUpstream } from "../faults/countingUpstream.ts";
import { startTestPlatform, TINY_CHAT, type TestPlatform, tinyModelEntries } from "../support/testPlatform.ts";

// One trace follows a request from the HTTP handler through the queue into the worker and the engine,
// and back through the relay (API and worker in this process; cross-process: crossProcessTracing).
const exporter = new InMemorySpanExporter();
let telemetry: Telemetry;
let upstream: CountingUpstream;
let platform: TestPlatform;
let key: string;
let keyId: string;
let sessionToken: string;
beforeAll(async () => {
  telemetry = startTelemetry({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });
  upstream = await startCountingUpstream({ totalTokens: 3, tokenDelayMs: 1, promptTokens: 5 });
  const upstreamModel = {
    id: UPSTREAM_MODEL,
    owned_by: "test-lab",
    engine: { type: "upstream" as const, baseUrl: upstream.baseUrl, model: "counting", maxConcurrency: 2 },
    capabilities: { chat: true, completions: true, embeddings: false, tools: false, json_schema: false, logprobs: false, reasoning: false },
    context_length: 8192,
    pricing: { input_per_million_chf: 1, output_per_million_chf: 2 },
  };
  platform = await startTestPlatform({ models: (file) => [...tinyModelEntries(file), upstreamModel] });
  const created = await platform.createKey();
  key = created.key;
  keyId = created.keyId;
  sessionToken = created.account.sessionToken;
});
afterAll(async () => {
  await platform?.close();
  await upstream?.close();
  await telemetry?.shutdown();
});

const PROMPT = "Tell me about the zebra-violet-umbrella";
const UPSTREAM_MODEL = "traced-upstream";

function childOf(spans: ReadableSpan[], parent: ReadableSpan, name: string): ReadableSpan {
  const found = spans.filter((s) => s.name === name && s.parentSpanContext?.spanId === parent.spanContext().spanId);
  expect(
    found.map((s) => s.name),
    `one ${name} under ${parent.name}`,
  ).toEqual([name]);
  return found[0]!;
}

async function traceOf(traceId: string, complete: (spans: ReadableSpan[]) => boolean): Promise<ReadableSpan[]> {
  return eventually(async () => {
    const found = exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === traceId);
    return complete(found) ? found : undefined;
  });
}

describe("tracing", () => {
  it("makes one trace of a request: API, enqueue, queue wait, worker run, engine (prefill, decode, first token), relay; no text, no secret", async () => {
    const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
    const response = await fetch(`${platform.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json", traceparent: `00-${traceId}-00f067aa0ba902b7-01` },
      body: JSON.stringify({ model: TINY_CHAT, messages: [{ role: "user", content: PROMPT }], max_tokens: 5, temperature: 0.5 }),
    });
    expect(response.status).toBe(200);
    const body = (await response.json()) as {
      id: string;
      usage: { prompt_tokens: number; completion_tokens: number };
      choices: { finish_reason: string; message: { content: string } }[];
    };
    expect(response.headers.get("x-trace-id")).toBe(traceId);
    expect(response.headers.get("traceparent")).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));

    const spans = await traceOf(traceId, (found) =>
      ["POST /v1/chat/completions", "RunCompletion", "relay RunCompletion"].every((n) => found.some((s) => s.name === n)),
    );
    const server = spans.find((s) => s.name === "POST /v1/chat/completions")!;
    expect(server.kind).toBe(SpanKind.SERVER);
    expect(server.parentSpanContext?.spanId).toBe("00f067aa0ba902b7");
    expect(response.headers.get("traceparent")).toBe(`00-${traceId}-${server.spanContext().spanId}-01`);
    expect(server.attributes["http.route"]).toBe("/v1/chat/completions");

    const enqueue = childOf(spans, server, "enqueue RunCompletion");
    expect(enqueue.kind).toBe(SpanKind.PRODUCER);
    expect(enqueue.attributes["messaging.message.id"]).toBe(body.id);
    const wait = childOf(spans, enqueue, "queue wait");
    expect(wait.attributes["inference.queue_wait_ms"]).toBeGreaterThanOrEqual(0);
    const run = childOf(spans, enqueue, "RunCompletion");
    expect(run.kind).toBe(SpanKind.CONSUMER);
    // The wait ends where the run begins (same clock here): pickup, then the run.
    expect(wait.endTime[0] * 1e3 + wait.endTime[1] / 1e6).toBeLessThanOrEqual(run.startTime[0] * 1e3 + run.startTime[1] / 1e6 + 1);

    const engine = childOf(spans, run, `chat ${TINY_CHAT}`);
    expect(engine.kind).toBe(SpanKind.CLIENT);
    expect(engine.attributes).toMatchObject({
      "gen_ai.operation.name": "chat",
      "gen_ai.request.model": TINY_CHAT,
      "gen_ai.request.max_tokens": 5,
      "gen_ai.request.temperature": 0.5,
      "gen_ai.response.id": body.id,
      "gen_ai.usage.input_tokens": body.usage.prompt_tokens,
      "gen_ai.usage.output_tokens": body.usage.completion_tokens,
      "gen_ai.response.finish_reasons": [body.choices[0].finish_reason],
    });
    expect(engine.events.map((e) => e.name)).toContain("gen_ai.first_token");
    const prefill = childOf(spans, engine, "prefill");
    const decode = childOf(spans, engine, "decode");
    expect(prefill.endTime).toEqual(engine.events.find((e) => e.name === "gen_ai.first_token")!.time);
    expect(decode.startTime[0] * 1e9 + decode.startTime[1]).toBeGreaterThanOrEqual(prefill.endTime[0] * 1e9 + prefill.endTime[1]);

    const relay = childOf(spans, server, "relay RunCompletion");
    expect(relay.attributes["gen_ai.usage.output_tokens"]).toBe(body.usage.completion_tokens);

    const recorded = await platform.deps.pool.query<{ data: { traceId: string } }>("SELECT data FROM es_events WHERE event_type = 'UsageRecorded'");
    expect(recorded.rows.map((r) => r.data.traceId)).toContain(traceId);

    const everything = JSON.stringify(spans.map((s) => ({ name: s.name, attributes: s.attributes, events: s.events })));
    expect(everything).not.toContain("zebra-violet");
    expect(everything).not.toContain(key.slice(3, 20));
    expect(everything).not.toContain(body.choices[0].message.content.trim().slice(0, 12) || "\u0000");
  });

  it("traces a request whose client's traceparent says not sampled (flag 00): the platform decides, and the whole trace is kept", async () => {
    const traceId = "1111111111111111aaaaaaaaaaaaaaaa";
    const response = await fetch(`${platform.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json", traceparent: `00-${traceId}-2222222222222222-00` },
      body: JSON.stringify({ model: TINY_CHAT, messages: [{ role: "user", content: "Hi" }], max_tokens: 3 }),
    });
    expect(response.status).toBe(200);
    await response.json();
    expect(response.headers.get("x-trace-id")).toBe(traceId);
    expect(response.headers.get("traceparent")).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));
    const spans = await traceOf(traceId, (found) =>
      ["POST /v1/chat/completions", "RunCompletion", `chat ${TINY_CHAT}`, "relay RunCompletion"].every((n) => found.some((s) => s.name === n)),
    );
    expect(spans.find((s) => s.name === "POST /v1/chat/completions")!.parentSpanContext?.spanId).toBe("2222222222222222");
  });

  it("names spans after route templates, never raw paths with ids", async () => {
    const response = await fetch(`${platform.baseUrl}/api/v1/accounts/user/api-keys/${keyId}`, { headers: { authorization: `Bearer ${sessionToken}` } });
    expect(response.status).toBe(200);
    const traceId = response.headers.get("x-trace-id")!;
    expect(traceId).toMatch(/^[0-9a-f]{32}$/);
    const [server] = await traceOf(traceId, (found) => found.some((s) => s.kind === SpanKind.SERVER));
    expect(server!.name).toMatch(/^GET \/api\/v1\/accounts\/user\/api-keys\/:[A-Za-z]+$/);
    const unknown = await fetch(`${platform.baseUrl}/v1/nothing/${keyId}`, { headers: { authorization: `Bearer ${key}` } });
    expect(unknown.status).toBe(404);
    const names = exporter.getFinishedSpans().map((s) => s.name);
    expect(names.filter((n) => n.includes(keyId))).toEqual([]);
  });

  it("sends the engine span's traceparent to an upstream engine", async () => {
    const response = await fetch(`${platform.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: UPSTREAM_MODEL, messages: [{ role: "user", content: PROMPT }], max_tokens: 10, stream: true }),
    });
    expect(response.status).toBe(200);
    await response.text();
    const traceId = response.headers.get("x-trace-id")!;
    const spans = await traceOf(traceId, (found) => found.some((s) => s.name === `chat ${UPSTREAM_MODEL}`));
    const engine = spans.find((s) => s.name === `chat ${UPSTREAM_MODEL}`)!;
    expect(upstream.requests.map((r) => r.traceparent)).toEqual([`00-${traceId}-${engine.spanContext().spanId}-01`]);
  });
});
