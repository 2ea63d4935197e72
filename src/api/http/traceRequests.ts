import { context, type Span, SpanKind, SpanStatusCode, propagation, trace } from "@opentelemetry/api";
import { statusSent } from "./clientClosed.ts";
import { getRPCMetadata, RPCType } from "@opentelemetry/core";
import type { Context, Next } from "koa";
import { platformTracer } from "../../observability/telemetry.ts";
import { type RouteTemplates, servedRoute } from "./routeTemplate.ts";
import { stateOf } from "./requestState.ts";

/** The response header naming the request's trace, for a user to hand to an operator. */
export const TRACE_ID_HEADER = "x-trace-id";

/**
 * One server span per request, named after its route template (`POST /v1/chat/completions`, never a
 * raw path with ids). With the http instrumentation loaded (register.ts) the span is its server span,
 * renamed here and given `http.route`; without it (tests), this middleware starts one, continuing an
 * incoming W3C `traceparent`. Attributes carry the method, route and status only: never headers,
 * bodies or keys.
 *
 * Every response of a traced request carries `x-trace-id` (the trace id) and `traceparent` (the
 * server span), set before the handler runs so that streams have them too. The trace id is also
 * `ctx.state.traceId` (the access log's).
 */
export function traceRequests(routes: RouteTemplates) {
  return async function traceRequest(ctx: Context, next: Next): Promise<void> {
    const rpc = getRPCMetadata(context.active());
    if (rpc?.type === RPCType.HTTP) {
      exposeTrace(ctx, rpc.span);
      // Named before the handler runs: the http instrumentation ends the span (named after `rpc.route`)
      // as soon as the client goes away, which may come first (a client that leaves while its key is
      // checked). The Koa instrumentation's layers keep it (instrumentations.ts).
      const name = () => {
        const route = servedRoute(routes, ctx);
        if (route) {
          rpc.route = route;
          stateOf(ctx).spanRoute = route;
          rpc.span.updateName(`${ctx.method} ${route}`);
        }
      };
      name();
      try {
        await next();
      } finally {
        name();
      }
      return;
    }
    const parent = propagation.extract(context.active(), ctx.headers);
    await context.with(parent, () =>
      platformTracer().startActiveSpan(ctx.method, { kind: SpanKind.SERVER, attributes: { "http.request.method": ctx.method } }, async (span) => {
        exposeTrace(ctx, span);
        try {
          await next();
          const status = statusSent(ctx);
          span.setAttribute("http.response.status_code", status);
          if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
        } catch (error) {
          span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error).name });
          throw error;
        } finally {
          const route = servedRoute(routes, ctx);
          if (route) {
            span.setAttribute("http.route", route);
            span.updateName(`${ctx.method} ${route}`);
          }
          span.end();
        }
      }),
    );
  };
}

function exposeTrace(ctx: Context, span: Span): void {
  const spanContext = span.spanContext();
  if (!trace.isSpanContextValid(spanContext)) return;
  stateOf(ctx).traceId = spanContext.traceId;
  ctx.set(TRACE_ID_HEADER, spanContext.traceId);
  ctx.set("traceparent", `00-${spanContext.traceId}-${spanContext.spanId}-0${(spanContext.traceFlags & 1).toString(16)}`);
}
