import { context, propagation, SpanKind, SpanStatusCode } from "@opentelemetry/api";
import type { Context, Next } from "koa";
import { platformTracer } from "../../observability/telemetry.ts";

/**
 * One server span per request, continuing an incoming W3C `traceparent`. Attributes carry the
 * method, path and status only: never headers, bodies or keys.
 */
export function traceRequests() {
  return async function traceRequest(ctx: Context, next: Next): Promise<void> {
    const parent = propagation.extract(context.active(), ctx.headers);
    await context.with(parent, () =>
      platformTracer().startActiveSpan(
        `${ctx.method} ${ctx.path}`,
        { kind: SpanKind.SERVER, attributes: { "http.request.method": ctx.method, "url.path": ctx.path } },
        async (span) => {
          try {
            await next();
            span.setAttribute("http.response.status_code", ctx.status);
            if (ctx.status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
          } catch (error) {
            span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error).name });
            throw error;
          } finally {
            span.end();
          }
        },
      ),
    );
  };
}
