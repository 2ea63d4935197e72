import { type ExportResult, ExportResultCode } from "@opentelemetry/core";
import type { ReadableSpan, SpanExporter } from "@opentelemetry/sdk-trace";

/** How often at most a failing export is reported (the spans dropped meanwhile are counted into the next report). */
export const EXPORT_FAILURE_REPORT_MS = 60_000;

/** What a report of failed exports says: the spans dropped since the last report, and the last error. */
export type ExportFailureReport = { droppedSpans: number; error: string };

/**
 * A span exporter that tells when its exports fail (the collector down, slow or refusing), which the SDK
 * otherwise drops silently: the first failure at once, then at most one report per EXPORT_FAILURE_REPORT_MS
 * with the spans dropped since. Exports themselves are the wrapped exporter's, unchanged.
 */
export class ReportingSpanExporter implements SpanExporter {
  readonly #inner: SpanExporter;
  readonly #report: (report: ExportFailureReport) => void;
  readonly #now: () => number;
  #dropped = 0;
  #lastReportAt = Number.NEGATIVE_INFINITY;

  constructor(inner: SpanExporter, report: (report: ExportFailureReport) => void, now: () => number = () => performance.now()) {
    this.#inner = inner;
    this.#report = report;
    this.#now = now;
  }

  export(spans: ReadableSpan[], resultCallback: (result: ExportResult) => void): void {
    this.#inner.export(spans, (result) => {
      if (result.code !== ExportResultCode.SUCCESS) this.#failed(spans.length, result.error);
      resultCallback(result);
    });
  }

  shutdown(): Promise<void> {
    return this.#inner.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.#inner.forceFlush?.() ?? Promise.resolve();
  }

  #failed(spans: number, error: Error | undefined): void {
    this.#dropped += spans;
    const now = this.#now();
    if (now - this.#lastReportAt < EXPORT_FAILURE_REPORT_MS) return;
    this.#lastReportAt = now;
    const droppedSpans = this.#dropped;
    this.#dropped = 0;
    this.#report({ droppedSpans, error: error?.message ?? "unknown error" });
  }
}
