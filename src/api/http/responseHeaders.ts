import type { Context } from "koa";

/**
 * Sets a response header, unless the headers were sent already: what Koa's ctx.set(name, value) does
 * for a string value, without the arrays Koa 3 builds on every call (for the headers every request sets).
 */
export function setHeader(ctx: Context, name: string, value: string): void {
  if (!ctx.headerSent) ctx.res.setHeader(name, value);
}

/** Where a handler's headers go, several at a time (the x-ratelimit-* headers), as with setHeader. */
export function responseHeaders(ctx: Context): { set(headers: Record<string, string>): void } {
  return {
    set(headers) {
      for (const name in headers) setHeader(ctx, name, headers[name]!);
    },
  };
}
