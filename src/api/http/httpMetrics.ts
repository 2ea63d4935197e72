import type { Context, Next } from "koa";
import type { PlatformMetrics } from "../../observability/metrics.ts";
import { type RouteTemplates, servedRoute, UNMATCHED_ROUTE } from "./routeTemplate.ts";

import { markClientClosed, statusSent } from "./clientClosed.ts";

/**
 * Counts every request by method, route template and final status, and observes its duration until
 * the response is finished or the connection closed (a stream: its whole length). Mounted above the
 * error handler, so the status is the one the client got; 499 when the client left before it began.
 */
export function httpMetrics(metrics: PlatformMetrics, routes: RouteTemplates) {
  return async function measureRequest(ctx: Context, next: Next): Promise<void> {
    const startedAt = process.hrtime.bigint();
    let recorded = false;
    const record = () => {
      if (recorded) return;
      recorded = true;
      // A client that left before the response began has no status yet (Koa's placeholder is 404): 499, as nginx logs it.
      const status = ctx.res.headersSent ? String(ctx.status) : String(statusSent(ctx));
      const labels = { method: ctx.method, route: servedRoute(routes, ctx) ?? UNMATCHED_ROUTE, status };
      metrics.http.requests.inc(labels);
      metrics.http.duration.observe(labels, Number(process.hrtime.bigint() - startedAt) / 1e9);
    };
    markClientClosed(ctx);
    ctx.res.once("finish", record);
    ctx.res.once("close", record);
    await next();
  };
}
