import type { Context, Next } from "koa";
import { DomainError } from "../../ledger/domainError.ts";
import { ConcurrencyError } from "../../ledger/eventStore/concurrencyError.ts";
import type { Logger } from "../../observability/logger.ts";
import { isDatabaseUnavailable } from "../../db/databaseUnavailable.ts";
import { isRedisUnavailable } from "../../redis/redisUnavailable.ts";
import { redactedPath } from "../../observability/redactedPath.ts";
import { stateOf } from "./requestState.ts";
import { ApiError, ConflictError, errorBody, InternalApiError, InvalidRequestError, NotFoundError, ServiceUnavailableError } from "./errors.ts";

/** Maps anything thrown below it to an ApiError. */
export function toApiError(error: unknown): ApiError {
  if (error instanceof ApiError) return error;
  if (error instanceof DomainError) {
    const options = { code: error.code, param: error.param };
    return error.kind === "not_found" ? new NotFoundError(error.message, options) : new InvalidRequestError(error.message, options);
  }
  if (error instanceof ConcurrencyError) {
    return new ConflictError("The resource was changed by another request at the same time; retry the request.");
  }
  // A dependency that is away: 503 with Retry-After, not 500.
  if (isRedisUnavailable(error)) return new ServiceUnavailableError("redis");
  if (isDatabaseUnavailable(error)) return new ServiceUnavailableError("postgres");
  const e = error as { status?: number; statusCode?: number; expose?: boolean; type?: string; message?: string };
  const status = e.status ?? e.statusCode;
  if (status && status >= 400 && status < 500) {
    if (e.type === "entity.parse.failed" || /JSON|parse/i.test(e.message ?? "")) {
      return new InvalidRequestError("We could not parse the JSON body of your request. The body must be valid JSON (Content-Type: application/json).", {
        code: "invalid_json",
      });
    }
    if (status === 413) return new ApiError(413, "invalid_request_error", "The request body is too large.", { code: "request_too_large" });
    if (status === 415) {
      return new ApiError(415, "invalid_request_error", "Unsupported Content-Type; send application/json.", { code: "unsupported_media_type" });
    }
    return new ApiError(status, "invalid_request_error", e.expose && e.message ? e.message : "Bad request.");
  }
  return new InternalApiError();
}

/** The request a failure's log line names: method, path, and its request and trace ids when it has them. */
function requestOf(ctx: Context): { method: string; path: string; requestId?: string; traceId?: string } {
  const { requestId, traceId } = stateOf(ctx);
  return { method: ctx.method, path: redactedPath(ctx.path), ...(requestId ? { requestId } : {}), ...(traceId ? { traceId } : {}) };
}

/** The one error handler, at the top of the middleware chain. */
export function errorHandler(logger: Logger) {
  return async function handleErrors(ctx: Context, next: Next): Promise<void> {
    try {
      await next();
    } catch (error) {
      const apiError = toApiError(error);
      if (apiError instanceof ServiceUnavailableError) {
        // An outage fails every request alike: one line each, no stack; joined to the request's access
        // line and trace by their ids; the cause underneath when the error carries one.
        const underneath = error instanceof ServiceUnavailableError && error.cause !== undefined ? error.cause : error;
        logger.warn("request failed: dependency unavailable", {
          ...requestOf(ctx),
          dependency: apiError.dependency,
          cause: (underneath as Error)?.message ?? String(underneath),
        });
      } else if (apiError.status >= 500 && error instanceof ApiError && !(error instanceof InternalApiError)) {
        // A 5xx the platform chose (load shed: too many password checks, a model without a worker): what
        // it says is known, one line without a stack.
        logger.warn("request refused", {
          ...requestOf(ctx),
          status: apiError.status,
          code: apiError.code,
        });
      } else if (apiError.status >= 500) {
        logger.error("request failed", { method: ctx.method, path: redactedPath(ctx.path), error: error as Error });
      }
      if (ctx.headerSent || !ctx.writable) return;
      ctx.status = apiError.status;
      ctx.set(apiError.headers);
      ctx.body = errorBody(apiError);
    }
  };
}
