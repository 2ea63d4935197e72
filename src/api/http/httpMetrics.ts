import type Router from "@koa/router";
import type { Context, Next } from "koa";
import type { PlatformMetrics } from "../../observability/metrics.ts";
import { routeTemplate } from "./routeTemplate.ts";

/**
 * Counts every request by method, route template and final status, and observes its duration until
 * the response is finished or the connection closed (a stream: its whole length). Mounted above the
 * error handler, so the status is the one the client got.
 */
export function httpMetrics(metrics: PlatformMetrics, routers: Router[]) {
  return async function measureRequest(ctx: Context, next: Next): Promise<void> {
    const startedAt = process.hrtime.bigint();
    let recorded = false;
    const record = () => {
      if (recorded) return;
      recorded = true;
      const labels = { method: ctx.method, route: routeTemplate(routers, ctx.method, ctx.path), status: String(ctx.status) };
      metrics.http.requests.inc(labels);
      metrics.http.duration.observe(labels, Number(process.hrtime.bigint() - startedAt) / 1e9);
    };
    ctx.res.once("finish", record);
    ctx.res.once("close", record);
    await next();
  };
}
