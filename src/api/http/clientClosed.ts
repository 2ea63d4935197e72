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
    if (!ctx.res.headersSent) ctx.res.statusCode = parserRefusalOf(ctx.req.socket) ?? CLIENT_CLOSED_REQUEST;
  });
}

/** The status the client got: 499 when it left before the response began (markClientClosed). */
export function statusSent(ctx: Context): number {
  if (!ctx.res.headersSent && !ctx.writable) return parserRefusalOf(ctx.req.socket) ?? CLIENT_CLOSED_REQUEST;
  return ctx.respond === false ? ctx.res.statusCode : ctx.status;
}

/** The status the HTTP parser's refusal answered on a connection (its request's body broke mid-way). */
const PARSER_REFUSAL = Symbol("parserRefusal");
/** How many requests of a connection the app is handling. */
const IN_APP = Symbol("requestsInApp");

type Marked = { [PARSER_REFUSAL]?: number; [IN_APP]?: number };

/**
 * The parser refused the connection's current request part-way through its body and answered `status`
 * itself (a broken chunk): the request's access line, metrics and span say that status, not 499 (the
 * client did not leave; it got that answer).
 */
export function markParserRefusal(socket: object, status: number): void {
  (socket as Marked)[PARSER_REFUSAL] = status;
}

export function parserRefusalOf(socket: object): number | undefined {
  return (socket as Marked)[PARSER_REFUSAL];
}

/** A request of the connection goes to the app until its response closes (appHandles). */
export function handledByApp(socket: object, res: { once(event: "close", listener: () => void): unknown }): void {
  const marked = socket as Marked;
  marked[IN_APP] = (marked[IN_APP] ?? 0) + 1;
  res.once("close", () => {
    marked[IN_APP] = (marked[IN_APP] ?? 1) - 1;
  });
}

/** Whether the app handles a request of the connection now (its refusal is then its request's, logged and counted there). */
export function appHandles(socket: object): boolean {
  return ((socket as Marked)[IN_APP] ?? 0) > 0;
}
