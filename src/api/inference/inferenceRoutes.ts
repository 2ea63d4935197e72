import Router from "@koa/router";
import type { AppDeps } from "../appDeps.ts";
import { ENDPOINT_FAMILIES } from "./endpointFamilies.ts";

/**
 * The routes of every inference endpoint family (ENDPOINT_FAMILIES): POST /v1/chat/completions,
 * /v1/completions, /v1/embeddings, /v1/responses and their reads. Authentication (403/402) is done by
 * inferenceAuthRoutes, mounted before this router.
 */
export function inferenceRoutes(deps: AppDeps): Router {
  const router = new Router({ sensitive: true });
  for (const family of ENDPOINT_FAMILIES) family.routes(router, deps);
  return router;
}
