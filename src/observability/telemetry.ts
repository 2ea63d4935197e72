import { trace, type Tracer } from "@opentelemetry/api";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import type { Instrumentation } from "@opentelemetry/instrumentation";
import { NodeSDK } from "@opentelemetry/sdk-node";
import type { SpanProcessor } from "@opentelemetry/sdk-trace";
import { AlwaysOnSampler, BatchSpanProcessor, ParentBasedSampler } from "@opentelemetry/sdk-trace";
import { CredentialScrubbingSpanExporter } from "./credentialScrubbingSpanExporter.ts";
import { type ExportFailureReport, ReportingSpanExporter } from "./reportingSpanExporter.ts";

export const TRACER_NAME = "inference-platform";

export function platformTracer(): Tracer {
  return trace.getTracer(TRACER_NAME);
}

export type Telemetry = { shutdown(): Promise<void> };

/**
 * Starts the OpenTelemetry SDK (W3C trace context propagation, AsyncLocalStorage context, spans
 * exported over OTLP/HTTP in batches) when an OTLP endpoint is configured, or when span processors are
 * given (tests). Otherwise tracing calls are no-ops and cost nothing.
 *
 * The library instrumentations (http, koa, pg, ioredis) are installed before the application loads by
 * the `--import` module (register.ts); they pick up the provider registered here. `instrumentations`
 * adds more (tests).
 *
 * Every request is traced: the platform decides, not its client. An incoming `traceparent` is
 * continued (its trace id), but its sampled flag is not obeyed: a client whose own tracing left a request
 * unsampled (flag 00) still gets a trace an operator can open by its `x-trace-id`. Spans started inside
 * the process follow their parent, as by default.
 */
export function startTelemetry(options: {
  otlpEndpoint?: string | undefined;
  serviceName?: string;
  spanProcessors?: SpanProcessor[];
  instrumentations?: Instrumentation[];
  /** Told when exports to the collector fail (ReportingSpanExporter: at once, then at most once a minute). */
  onExportFailure?: (report: ExportFailureReport) => void;
}): Telemetry {
  const processors = [...(options.spanProcessors ?? [])];
  if (options.otlpEndpoint) {
    const url = `${options.otlpEndpoint.replace(/\/$/, "")}/v1/traces`;
    const exporter = new OTLPTraceExporter({ url });
    // No credential leaves in what a span says of an error (CredentialScrubbingSpanExporter).
    const reporting = options.onExportFailure ? new ReportingSpanExporter(exporter, options.onExportFailure) : exporter;
    processors.push(new BatchSpanProcessor({ exporter: new CredentialScrubbingSpanExporter(reporting) }));
  }
  if (processors.length === 0) return { shutdown: async () => undefined };
  const sdk = new NodeSDK({
    serviceName: options.serviceName ?? TRACER_NAME,
    spanProcessors: processors,
    sampler: new ParentBasedSampler({ root: new AlwaysOnSampler(), remoteParentNotSampled: new AlwaysOnSampler() }),
    instrumentations: options.instrumentations ?? [],
  });
  sdk.start();
  return { shutdown: () => sdk.shutdown() };
}
