import type { Context, Next } from "koa";

const isApiPath = (path: string) => path === "/v1" || path.startsWith("/v1/") || path === "/api" || path.startsWith("/api/");

/**
 * Headers every answer carries: no MIME sniffing, no referrer. The JSON APIs (`/v1`, `/api`) are never
 * framed, load nothing, and are never stored by a cache (completions, keys and usage are private);
 * a handler may still set its own Cache-Control. HSTS when the request came over HTTPS (directly or
 * through a proxy's X-Forwarded-Proto).
 */
export function securityHeaders() {
  return async function setSecurityHeaders(ctx: Context, next: Next): Promise<void> {
    ctx.set("x-content-type-options", "nosniff");
    ctx.set("referrer-policy", "no-referrer");
    if (isApiPath(ctx.path)) {
      ctx.set("cache-control", "no-store");
      ctx.set("x-frame-options", "DENY");
      ctx.set("content-security-policy", "default-src 'none'; frame-ancestors 'none'");
    }
    if (ctx.secure) ctx.set("strict-transport-security", "max-age=31536000");
    await next();
  };
}
