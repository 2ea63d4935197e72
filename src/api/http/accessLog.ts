import type { Context, Next } from "koa";
import { statusSent } from "./clientClosed.ts";
import type { Logger } from "../../observability/logger.ts";
import { type AccessLogInference, stateOf } from "./requestState.ts";
import { type RouteTemplates, servedRoute } from "./routeTemplate.ts";

export type { AccessLogInference };

/** The inference part of a request's access log line: `ctx.state.inference`, filled as the request goes. */
export function accessLogInference(ctx: Context): AccessLogInference | undefined {
  return stateOf(ctx).inference;
}

/**
 * One JSON line per request once its response is over (a stream: when it ended), message "request":
 * method, route template (null for a URL no route serves: never the raw path, which may carry ids),
 * status, durationMs, requestId, traceId, keyId (the key's id, never the key), and for inference the
 * model and the tokens in and out. No header, query or body is logged; the logger redacts
 * secret-named fields anyway. Mount it inside requestId and traceRequests, outside the error handler
 * (it logs the status the error handler chose).
 */
export function accessLog(logger: Logger, routes: RouteTemplates, now: () => number = () => performance.now()) {
  return async function logAccess(ctx: Context, next: Next): Promise<void> {
    const started = now();
    try {
      await next();
    } finally {
      const inference = accessLogInference(ctx);
      const { principal, requestId, traceId } = stateOf(ctx);
      logger.info("request", {
        method: ctx.method,
        route: servedRoute(routes, ctx) ?? null,
        status: statusSent(ctx),
        durationMs: Math.round((now() - started) * 10) / 10,
        requestId: requestId ?? null,
        traceId: traceId ?? null,
        keyId: principal?.keyId ?? null,
        // An operator's call of the admin API: who called, as docs/audit.md says an admin:http change's
        // correlation id leads to (the line had no address; only a trace had it).
        ...(isAdminPath(ctx.path) ? { clientAddress: ctx.request.ip } : {}),
        ...(inference
          ? {
              model: inference.model,
              ...(inference.inputTokens === undefined ? {} : { inputTokens: inference.inputTokens }),
              ...(inference.outputTokens === undefined ? {} : { outputTokens: inference.outputTokens }),
            }
          : {}),
      });
    }
  };
}

const isAdminPath = (path: string) => path === "/api/v1/admin" || path.startsWith("/api/v1/admin/");
