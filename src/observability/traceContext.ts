import { type Context, context, propagation, trace } from "@opentelemetry/api";

/** The W3C traceparent of a context (default: the active one), if tracing is on. */
export function traceparentOf(ctx: Context = context.active()): string | undefined {
  const carrier: Record<string, string> = {};
  propagation.inject(ctx, carrier);
  return carrier.traceparent;
}

/** The context a W3C traceparent continues (the active one when there is none). */
export function contextOf(traceparent: string | undefined): Context {
  return traceparent ? propagation.extract(context.active(), { traceparent }) : context.active();
}

/** The trace id of a W3C traceparent (`00-<trace-id>-<span-id>-<flags>`). */
export function traceIdOf(traceparent: string | undefined): string | null {
  const match = /^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$/.exec(traceparent ?? "");
  return match ? match[1]! : null;
}

/** The trace id of the active span, if one is being recorded or continued. */
export function activeTraceId(): string | undefined {
  const span = trace.getActiveSpan();
  if (!span) return undefined;
  const { traceId } = span.spanContext();
  return trace.isSpanContextValid(span.spanContext()) ? traceId : undefined;
}
