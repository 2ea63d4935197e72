import { createServer } from "node:net";
import type { AddressInfo } from "node:net";
import { ExportResultCode } from "@opentelemetry/core";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";
import { describe, expect, it } from "vitest";
import { EXPORT_FAILURE_REPORT_MS, type ExportFailureReport, ReportingSpanExporter } from "../../src/observability/reportingSpanExporter.ts";

/** A loopback port nothing listens on (taken, then given back). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

async function someSpans(count: number): Promise<ReadableSpan[]> {
  const memory = new InMemorySpanExporter();
  const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter: memory })] });
  for (let i = 0; i < count; i++) provider.getTracer("test").startSpan(`span ${i}`).end();
  await provider.forceFlush();
  const spans = memory.getFinishedSpans();
  expect(spans).toHaveLength(count);
  return spans;
}

const exportOnce = (exporter: ReportingSpanExporter, spans: ReadableSpan[]) =>
  new Promise<number>((resolve) => exporter.export(spans, (result) => resolve(result.code)));

describe("ReportingSpanExporter", () => {
  it("reports a collector that refuses at once, then at most once a minute with the spans dropped meanwhile", async () => {
    const reports: ExportFailureReport[] = [];
    let now = 0;
    const inner = new OTLPTraceExporter({ url: `http://127.0.0.1:${await closedPort()}/v1/traces`, timeoutMillis: 2_000 });
    const exporter = new ReportingSpanExporter(
      inner,
      (report) => reports.push(report),
      () => now,
    );
    expect(await exportOnce(exporter, await someSpans(3))).toBe(ExportResultCode.FAILED);
    expect(reports).toEqual([{ droppedSpans: 3, error: expect.any(String) }]);
    now += 1_000;
    expect(await exportOnce(exporter, await someSpans(2))).toBe(ExportResultCode.FAILED);
    expect(reports).toHaveLength(1);
    now += EXPORT_FAILURE_REPORT_MS;
    expect(await exportOnce(exporter, await someSpans(1))).toBe(ExportResultCode.FAILED);
    expect(reports).toHaveLength(2);
    expect(reports[1]!.droppedSpans).toBe(3);
    await exporter.shutdown();
  });

  it("says nothing while exports succeed", async () => {
    const reports: ExportFailureReport[] = [];
    const exporter = new ReportingSpanExporter(new InMemorySpanExporter(), (report) => reports.push(report));
    expect(await exportOnce(exporter, await someSpans(2))).toBe(ExportResultCode.SUCCESS);
    expect(reports).toEqual([]);
  });
});
