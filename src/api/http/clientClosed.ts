import type { Context } from "koa";

/** nginx's status for a request whose client closed the connection before the response began. */
export const CLIENT_CLOSED_REQUEST = 499;

/**
 * Marks the response 499 once its client closes the connection before any of it was sent: the HTTP
 * instrumentation's server span (which reads the status when the connection closes: hence prepended, to
 * run before its listener), the access log and the metrics then all say what the client got, instead of
 * Koa's placeholder 404 or a 200 the handler set for nobody.
 */
export function markClientClosed(ctx: Context): void {
  ctx.res.prependListener("close", () => {
    if (!ctx.res.headersSent) ctx.res.statusCode = CLIENT_CLOSED_REQUEST;
  });
}

/** The status the client got: 499 when it left before the response began (markClientClosed). */
export function statusSent(ctx: Context): number {
  if (!ctx.res.headersSent && !ctx.writable) return CLIENT_CLOSED_REQUEST;
  return ctx.respond === false ? ctx.res.statusCode : ctx.status;
}
