import { SpanStatusCode } from "@opentelemetry/api";
import { InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor } from "@opentelemetry/sdk-trace";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTelemetry, type Telemetry } from "../../src/observability/telemetry.ts";
import { BatchTestPlatform } from "../batches/batchTestPlatform.ts";
import { chatLine, createSameLinesBatch, uploadBatchFile, waitForStatus } from "../batches/batchSteps.ts";
import { eventually } from "../support/eventually.ts";
import { TINY_CHAT } from "../support/testPlatform.ts";

// A Batch API line's run is one trace, as a request's is: its enqueue, the worker's run and the relay of
// its reply under a `batch line` span that names the batch and the line (before, the relay was a trace of
// its own, and nothing named the batch).
const exporter = new InMemorySpanExporter();
let telemetry: Telemetry;
let batches: BatchTestPlatform;

beforeAll(async () => {
  telemetry = startTelemetry({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });
  batches = await BatchTestPlatform.start({ env: { BATCH_POLL_MS: "50" } });
}, 60_000);
afterAll(async () => {
  await batches?.close();
  await telemetry?.shutdown();
});

describe("tracing of batch lines", () => {
  it("makes one trace per line run: batch line -> enqueue, worker run, relay", async () => {
    const { platform } = batches;
    const { key } = await platform.createKey();
    const openai = platform.openai(key);
    const { batchId } = await createSameLinesBatch(openai, { model: TINY_CHAT, messages: [{ role: "user", content: "Hi" }], max_tokens: 4 }, 2);
    expect((await waitForStatus(openai, batchId, ["completed", "failed"])).status).toBe("completed");

    const lineSpans = await eventually(async () => {
      const found = exporter.getFinishedSpans().filter((s) => s.name === "batch line" && s.attributes["batch.id"] === batchId);
      return found.length === 2 ? found : undefined;
    });
    expect(lineSpans.map((s) => s.attributes["batch.line"]).sort()).toEqual([1, 2]);
    for (const lineSpan of lineSpans) {
      const traceId = lineSpan.spanContext().traceId;
      const inTrace = exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === traceId);
      const parentOf = (span: ReadableSpan) => inTrace.find((s) => s.spanContext().spanId === span.parentSpanContext?.spanId);
      const under = (name: string) => {
        const span = inTrace.find((s) => s.name === name);
        expect(span, `${name} in the line's trace`).toBeDefined();
        let ancestor = parentOf(span!);
        while (ancestor && ancestor !== lineSpan) ancestor = parentOf(ancestor);
        expect(ancestor, `${name} under the batch line span`).toBe(lineSpan);
      };
      under("enqueue RunCompletion");
      under("relay RunCompletion");
      under("RunCompletion");
    }
  }, 60_000);

  it("marks a failed line's span an error with the status its line got; a done line's stays unset", async () => {
    const { platform } = batches;
    const { key } = await platform.createKey();
    const openai = platform.openai(key);
    // The model is checked when the line runs: that line ends in the error file with a 400, the other is done.
    const inputFileId = await uploadBatchFile(openai, [chatLine(0, TINY_CHAT), chatLine(1, "no-such-model")]);
    const batch = await openai.batches.create({ input_file_id: inputFileId, endpoint: "/v1/chat/completions", completion_window: "24h" });
    const ended = await waitForStatus(openai, batch.id, ["completed", "failed"]);
    expect(ended.request_counts).toMatchObject({ completed: 1, failed: 1 });
    const lineSpans = await eventually(async () => {
      const found = exporter.getFinishedSpans().filter((s) => s.name === "batch line" && s.attributes["batch.id"] === batch.id);
      return found.length === 2 ? found : undefined;
    });
    const byLine = new Map(lineSpans.map((s) => [s.attributes["batch.line"], s]));
    expect(byLine.get(1)!.status.code).toBe(SpanStatusCode.UNSET);
    expect(byLine.get(1)!.attributes["http.response.status_code"]).toBe(200);
    expect(byLine.get(2)!.status).toEqual({ code: SpanStatusCode.ERROR, message: "failed: model_not_found" });
    expect(byLine.get(2)!.attributes["http.response.status_code"]).toBe(400);
  }, 60_000);
});
