import Router from "@koa/router";
import type { AppDeps } from "../appDeps.ts";

/**
 * `GET /metrics` on the API's port: the Prometheus text of the process's registry (every role of the
 * process). No auth, like /healthz: METRICS_ON_API_PORT=false takes it off the public port (then serve
 * it on METRICS_PORT). Label values carry no key, account or completion id.
 */
export function metricsRoutes(deps: AppDeps): Router {
  const router = new Router({ sensitive: true });
  if (!deps.config.metrics.onApiPort) return router;
  router.get("/metrics", async (ctx) => {
    const { contentType, body } = await deps.metrics.scrape();
    ctx.set("content-type", contentType);
    ctx.body = body;
  });
  return router;
}
