import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTelemetry, type Telemetry } from "../../src/observability/telemetry.ts";
import { eventually } from "../support/eventually.ts";
import { startTestPlatform, TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";

// One trace follows a request from the HTTP handler through the queue into the worker.
const exporter = new InMemorySpanExporter();
let telemetry: Telemetry;
let platform: TestPlatform;
let key: string;
beforeAll(async () => {
  telemetry = startTelemetry({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });
  platform = await startTestPlatform();
  key = (await platform.createKey()).key;
});
afterAll(async () => {
  await platform?.close();
  await telemetry?.shutdown();
});

describe("tracing", () => {
  it("continues the caller's trace in the API span and in the worker's RunCompletion span, without secrets", async () => {
    const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
    const response = await fetch(`${platform.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${key}`,
        "content-type": "application/json",
        traceparent: `00-${traceId}-00f067aa0ba902b7-01`,
      },
      body: JSON.stringify({ model: TINY_CHAT, messages: [{ role: "user", content: "Hi" }], max_tokens: 5 }),
    });
    expect(response.status).toBe(200);
    const spans = await eventually(async () => {
      const found = exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === traceId);
      return found.some((s) => s.name === "RunCompletion") && found.some((s) => s.name.startsWith("POST")) ? found : undefined;
    });
    const server = spans.find((s) => s.name === "POST /v1/chat/completions")!;
    const worker = spans.find((s) => s.name === "RunCompletion")!;
    expect(server.parentSpanContext?.spanId).toBe("00f067aa0ba902b7");
    expect(worker.parentSpanContext?.spanId).toBe(server.spanContext().spanId);
    expect(worker.attributes["inference.model"]).toBe(TINY_CHAT);
    const recorded = await platform.deps.pool.query<{ data: { traceId: string } }>("SELECT data FROM es_events WHERE event_type = 'UsageRecorded'");
    expect(recorded.rows.map((r) => r.data.traceId)).toContain(traceId);
    expect(JSON.stringify(spans.map((s) => s.attributes))).not.toContain(key.slice(3, 20));
  });
});
