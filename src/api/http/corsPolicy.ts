import cors from "@koa/cors";
import type { Context, Next } from "koa";

/** Who may call from a browser: `*` (any origin, never with credentials) or exact origins. Empty: no CORS. */
export type CorsOrigins = "*" | string[];

export type CorsPolicyOptions = {
  /** Origins allowed on `/v1/*` (the inference API). */
  v1: CorsOrigins;
  /** Origins allowed on `/api/*` (accounts, keys, usage, admin). */
  api: CorsOrigins;
};

/** Response headers a browser script may read: ids, retry hints, resume, and where it stands against its rate limits. */
const EXPOSED_HEADERS = [
  "x-request-id",
  "x-completion-id",
  // A GET of a cancelled or failed completion says so here (its body is the partial reply); the trace id an operator opens.
  "x-completion-status",
  "x-trace-id",
  "retry-after",
  "x-should-retry",
  ...["limit", "remaining", "reset"].flatMap((name) => [`x-ratelimit-${name}-requests`, `x-ratelimit-${name}-tokens`]),
];
const ALLOWED_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"];
const PREFLIGHT_MAX_AGE_S = 600;

function originsFor(path: string, options: CorsPolicyOptions): CorsOrigins {
  if (path === "/v1" || path.startsWith("/v1/")) return options.v1;
  if (path === "/api" || path.startsWith("/api/")) return options.api;
  return [];
}

/** The Access-Control-Allow-Origin value for this request, or "" (no CORS headers at all). */
function allowedOrigin(ctx: Context, origins: CorsOrigins): string {
  if (origins === "*") return "*";
  const origin = ctx.get("origin");
  return origin && origins.includes(origin) ? origin : "";
}

const isPreflight = (ctx: Context) => ctx.method === "OPTIONS" && ctx.get("access-control-request-method") !== "";

/**
 * CORS with @koa/cors, before authentication: a preflight (`OPTIONS` with Access-Control-Request-Method)
 * is answered 204 here and never reaches the API-key or session checks. Requested headers are reflected
 * (the SDKs send their own `x-stainless-*` headers); credentials (cookies) are never allowed, the API
 * authenticates with bearer tokens. A preflight from an origin that is not allowed gets a 204 without
 * CORS headers, which the browser refuses. Mount it above the error handler so errors carry the headers.
 */
export function corsPolicy(options: CorsPolicyOptions) {
  const handle = cors({
    origin: (ctx) => allowedOrigin(ctx, originsFor(ctx.path, options)),
    credentials: false,
    allowMethods: ALLOWED_METHODS,
    exposeHeaders: EXPOSED_HEADERS,
    maxAge: PREFLIGHT_MAX_AGE_S,
    keepHeadersOnError: false,
  });
  return async function applyCors(ctx: Context, next: Next): Promise<void> {
    await handle(ctx, async () => {
      if (isPreflight(ctx)) {
        ctx.status = 204;
        return;
      }
      await next();
    });
  };
}
