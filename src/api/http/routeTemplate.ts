import type Router from "@koa/router";

/** The route label of a request that no route serves (unknown URLs, wrong methods): never its raw path. */
export const UNMATCHED_ROUTE = "unmatched";

/**
 * The template of the route that serves `method path` among `routers` (`/v1/chat/completions`,
 * `/api/v1/accounts/user/api-keys/:id`), through the routers' public `match`; catch-all guards such as
 * the `/v1{/*rest}` of inferenceAuthRoutes do not count as the route. UNMATCHED_ROUTE when none serves
 * it, so a label never carries an id or a path a client made up.
 */
export function routeTemplate(routers: Router[], method: string, path: string): string {
  let template: string = UNMATCHED_ROUTE;
  for (const router of routers) {
    for (const layer of router.match(path, method).pathAndMethod) {
      if (typeof layer.path === "string" && !layer.path.includes("{/*")) template = layer.path;
    }
  }
  return template;
}

/**
 * The template of the route that served this request, or undefined when none did: the metrics label,
 * the span name and the access log's route, matched once per request (kept in `ctx.state.routeTemplate`).
 */
export function servedRoute(routers: Router[], ctx: { method: string; path: string; state: Record<string, unknown> }): string | undefined {
  let template = ctx.state.routeTemplate;
  if (typeof template !== "string") {
    template = routeTemplate(routers, ctx.method, ctx.path);
    ctx.state.routeTemplate = template;
  }
  return template === UNMATCHED_ROUTE ? undefined : (template as string);
}
