import type Router from "@koa/router";

/** The route label of a request that no route serves (unknown URLs, wrong methods): never its raw path. */
export const UNMATCHED_ROUTE = "unmatched";

/** Paths remembered by RouteTemplates, and the longest remembered (ids in paths make most of them one-offs). */
const REMEMBERED_PATHS = 256;
const REMEMBERED_PATH_LENGTH = 200;

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
 * The route templates of an app's routers (routeTemplate), the answers for the latest paths remembered
 * per method: a router's match builds its lists anew on every call, and most requests ask for one of a
 * few paths (POST /v1/chat/completions). A bounded memory: a client's made-up paths only displace
 * others, and long paths are never kept.
 */
export class RouteTemplates {
  readonly #routers: Router[];
  readonly #byMethod = new Map<string, Map<string, string>>();

  constructor(routers: Router[]) {
    this.#routers = routers;
  }

  of(method: string, path: string): string {
    let known = this.#byMethod.get(method);
    const remembered = known?.get(path);
    if (remembered !== undefined) return remembered;
    const template = routeTemplate(this.#routers, method, path);
    if (path.length <= REMEMBERED_PATH_LENGTH) {
      if (!known) {
        known = new Map();
        this.#byMethod.set(method, known);
      }
      if (known.size >= REMEMBERED_PATHS) known.clear();
      known.set(path, template);
    }
    return template;
  }
}

/**
 * The template of the route that served this request, or undefined when none did: the metrics label,
 * the span name and the access log's route, matched once per request (kept in `ctx.state.routeTemplate`).
 */
export function servedRoute(routes: RouteTemplates, ctx: { method: string; path: string; state: Record<string, unknown> }): string | undefined {
  let template = ctx.state.routeTemplate;
  if (typeof template !== "string") {
    template = routes.of(ctx.method, ctx.path);
    ctx.state.routeTemplate = template;
  }
  return template === UNMATCHED_ROUTE ? undefined : (template as string);
}
