import Router from "@koa/router";
import type { AppDeps } from "../appDeps.ts";

/** Liveness and readiness for load balancers: no auth, no secrets. */
export function healthRoutes(deps: AppDeps): Router {
  const router = new Router();
  router.get("/healthz", (ctx) => {
    ctx.body = { status: "ok" };
  });
  router.get("/readyz", async (ctx) => {
    await deps.pool.query("SELECT 1");
    await deps.redis.ping();
    ctx.body = { status: "ready" };
  });
  return router;
}
