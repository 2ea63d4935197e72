import Router from "@koa/router";
import type { AppDeps } from "../appDeps.ts";
import { inferenceAuth } from "./inferenceAuth.ts";

/**
 * Guards every `/v1` path (any method, known route or not) with inferenceAuth, then passes on to the
 * routers mounted after it. Mount it before every slice that serves `/v1/*`; those handlers can rely
 * on principalOf(ctx).
 */
export function inferenceAuthRoutes(deps: AppDeps): Router {
  const router = new Router({ sensitive: true });
  router.all("/v1{/*rest}", inferenceAuth(deps));
  return router;
}
