import type { Context } from "koa";

/**
 * The template of the route that served a request (`/api/v1/accounts/user/api-keys/:id`), as
 * @koa/router records it (`ctx._matchedRoute`); undefined when no route matched (a 404). Never the raw
 * path: span names, log lines and metric labels stay free of ids.
 */
export function routeTemplate(ctx: Context): string | undefined {
  const matched = (ctx as Context & { _matchedRoute?: unknown })._matchedRoute;
  return typeof matched === "string" ? matched : undefined;
}
