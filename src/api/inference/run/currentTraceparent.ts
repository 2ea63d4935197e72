import { context, propagation } from "@opentelemetry/api";

/** The W3C traceparent of the active span (for the job's trace context), if tracing is on. */
export function currentTraceparent(): string | undefined {
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  return carrier.traceparent;
}
