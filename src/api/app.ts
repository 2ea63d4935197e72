import { throttledWarning } from "../observability/throttledWarning.ts";
import Koa from "koa";
import type Router from "@koa/router";
import type { AppDeps } from "./appDeps.ts";
import { errorHandler } from "./http/errorHandler.ts";
import { NotFoundError } from "./http/errors.ts";
import { traceRequests } from "./http/traceRequests.ts";
import { accessLog } from "./http/accessLog.ts";
import { requestId } from "./http/requestId.ts";
import { httpMetrics } from "./http/httpMetrics.ts";
import { corsPolicy } from "./http/corsPolicy.ts";
import { securityHeaders } from "./http/securityHeaders.ts";
import { requestBodies } from "./http/requestBody.ts";
import { clientAddress } from "./http/clientAddress.ts";
import { RouteTemplates } from "./http/routeTemplate.ts";

export type RouteFactory = (deps: AppDeps) => Router;

/**
 * The Koa application: one error handler at the top, the lazy JSON body reader, then every slice's router, then a
 * 404 in the OpenAI error shape for anything no route took.
 */
export function createApp(deps: AppDeps, routeFactories: RouteFactory[]): Koa {
  const app = new Koa({ proxy: deps.config.trustProxyHops > 0, maxIpsCount: deps.config.trustProxyHops });
  const routers = routeFactories.map((factory) => factory(deps));
  const routes = new RouteTemplates(routers);
  app.use(requestId());
  // Draining: every answer closes its connection (the client's next request opens one elsewhere).
  const shutdown = deps.shutdown;
  if (shutdown) {
    app.use(async (ctx, next) => {
      if (shutdown.draining) ctx.set("connection", "close");
      await next();
      // A request that came before the drain began and is answered after it: its connection closes too.
      if (shutdown.draining && !ctx.headerSent) ctx.set("connection", "close");
    });
  }
  app.use(traceRequests(routes));
  app.use(httpMetrics(deps.metrics, routes));
  app.use(accessLog(deps.logger.child({ log: "access" }), routes));
  app.use(securityHeaders());
  app.use(corsPolicy(deps.config.cors));
  app.use(errorHandler(deps.logger));
  app.use(clientAddress());
  // Bodies are read by the route (validate), after its authentication; never here.
  app.use(
    requestBodies({ maxBytes: deps.config.maxRequestBodyBytes, idleMs: deps.config.bodyIdleTimeoutMs, publicDeadlineMs: deps.config.publicBodyTimeoutMs }),
  );
  for (const router of routers) app.use(router.routes());
  app.use(async (ctx) => {
    throw new NotFoundError(`Unknown request URL: ${ctx.method} ${ctx.path}.`, { code: "unknown_url" });
  });
  // What koa reports after the answer began (a client that stopped reading a download: ECONNRESET, a
  // premature close) goes to the JSON log, not to stderr as koa's own multi-line stack.
  const responseFailed = throttledWarning(deps.logger, "response not delivered whole");
  app.on("error", (error: Error & { code?: string }) => {
    const clientGone = error.code === "ECONNRESET" || error.code === "ERR_STREAM_PREMATURE_CLOSE" || error.code === "EPIPE";
    if (clientGone) deps.logger.debug("client went away during the response", { code: error.code });
    else responseFailed({ error });
  });
  return app;
}
