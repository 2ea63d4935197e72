import type { Context, Next } from "koa";
import { setHeader } from "./responseHeaders.ts";

/** The JSON APIs, the console's own (`/console/session`, `/console/models`) included; its assets set their own. */
const isApiPath = (path: string) =>
  path === "/v1" || path.startsWith("/v1/") || path === "/api" || path.startsWith("/api/") || path === "/console" || path.startsWith("/console/");

/**
 * Headers every answer carries: no MIME sniffing, no referrer. The JSON APIs (`/v1`, `/api`, `/console`) are never
 * framed, load nothing, and are never stored by a cache (completions, keys and usage are private);
 * a handler may still set its own Cache-Control. HSTS when the request came over HTTPS (directly or
 * through a proxy's X-Forwarded-Proto).
 */
export function securityHeaders() {
  return async function setSecurityHeaders(ctx: Context, next: Next): Promise<void> {
    setHeader(ctx, "x-content-type-options", "nosniff");
    setHeader(ctx, "referrer-policy", "no-referrer");
    if (isApiPath(ctx.path)) {
      setHeader(ctx, "cache-control", "no-store");
      setHeader(ctx, "x-frame-options", "DENY");
      setHeader(ctx, "content-security-policy", "default-src 'none'; frame-ancestors 'none'");
    }
    if (ctx.secure) setHeader(ctx, "strict-transport-security", "max-age=31536000");
    await next();
  };
}
