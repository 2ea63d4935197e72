import { trace, type Tracer } from "@opentelemetry/api";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { NodeSDK } from "@opentelemetry/sdk-node";
import type { SpanProcessor } from "@opentelemetry/sdk-trace";
import { BatchSpanProcessor } from "@opentelemetry/sdk-trace";

export const TRACER_NAME = "inference-platform";

export function platformTracer(): Tracer {
  return trace.getTracer(TRACER_NAME);
}

export type Telemetry = { shutdown(): Promise<void> };

/**
 * Starts the OpenTelemetry SDK (W3C trace context propagation, AsyncLocalStorage context) when an
 * OTLP endpoint is configured, or when span processors are given (tests). Otherwise tracing calls
 * are no-ops and cost nothing.
 */
export function startTelemetry(options: { otlpEndpoint?: string; serviceName?: string; spanProcessors?: SpanProcessor[] }): Telemetry {
  const processors = [...(options.spanProcessors ?? [])];
  if (options.otlpEndpoint) {
    const url = `${options.otlpEndpoint.replace(/\/$/, "")}/v1/traces`;
    processors.push(new BatchSpanProcessor({ exporter: new OTLPTraceExporter({ url }) }));
  }
  if (processors.length === 0) return { shutdown: async () => undefined };
  const sdk = new NodeSDK({ serviceName: options.serviceName ?? TRACER_NAME, spanProcessors: processors, instrumentations: [] });
  sdk.start();
  return { shutdown: () => sdk.shutdown() };
}
