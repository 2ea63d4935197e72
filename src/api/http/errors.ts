import { credentialsRedacted } from "../../observability/credentialsRedacted.ts";
/**
 * The one error vocabulary of the HTTP API. Every failure a client sees is an ApiError rendered by
 * errorHandler into the OpenAI shape {"error": {"message", "type", "param", "code"}}.
 */
export class ApiError extends Error {
  readonly status: number;
  readonly type: string;
  readonly code: string | null;
  readonly param: string | null;
  /** Some bodies carry only message and type (the spec's subscription error). */
  readonly bare: boolean;
  readonly headers: Record<string, string>;
  constructor(
    status: number,
    type: string,
    message: string,
    options: { code?: string | null; param?: string | null; bare?: boolean; headers?: Record<string, string> } = {},
  ) {
    // Never a credential it quotes (the error is recorded on its request's span): credentialsRedacted.
    super(clipped(credentialsRedacted(message), MAX_MESSAGE_CHARS));
    this.name = new.target.name;
    this.status = status;
    this.type = type;
    this.code = options.code ?? null;
    this.param = options.param === undefined || options.param === null ? null : clipped(credentialsRedacted(options.param), MAX_PARAM_CHARS);
    this.bare = options.bare ?? false;
    this.headers = options.headers ?? {};
  }
}

/**
 * An error's message and param are cut to these lengths (with "…"): they quote what a client sent (an
 * unknown field's name, a model id), which may be megabytes long; the answer stays small.
 */
const MAX_MESSAGE_CHARS = 2_000;
const MAX_PARAM_CHARS = 256;

/** `text` cut to at most `max` UTF-16 units plus "…", never between the two halves of a surrogate pair. */
export function clipped(text: string, max: number): string {
  if (text.length <= max) return text;
  const code = text.charCodeAt(max - 1);
  const end = code >= 0xd800 && code <= 0xdbff ? max - 1 : max;
  return `${text.slice(0, end)}…`;
}

export class InvalidRequestError extends ApiError {
  constructor(message: string, options: { param?: string | null; code?: string | null } = {}) {
    super(400, "invalid_request_error", message, options);
  }
}

export class AuthenticationError extends ApiError {
  constructor(message: string, code = "invalid_session") {
    super(401, "authentication_error", message, { code });
  }
}

export class SubscriptionRequiredError extends ApiError {
  constructor(message = "An active subscription is required to use the inference API.") {
    super(402, "subscription_required", message, { bare: true });
  }
}

export class ForbiddenError extends ApiError {
  constructor(message = "Invalid or revoked API key.", code: string | null = "invalid_api_key") {
    super(403, "Forbidden", message, { code });
  }
}

export class NotFoundError extends ApiError {
  constructor(message: string, options: { param?: string | null; code?: string | null } = {}) {
    super(404, "invalid_request_error", message, { code: options.code ?? "not_found", param: options.param ?? null });
  }
}

export class ConflictError extends ApiError {
  /**
   * `final`: the same request can never succeed (a cancelled completion, a batch that has ended, a taken
   * email): `x-should-retry: false`, for the official SDKs retry a 409 by default, and a retried POST of a
   * cancelled completion would start and charge a new one. Without it, a retry may succeed (a concurrent
   * change, a request still starting).
   */
  constructor(message: string, options: { param?: string | null; code?: string | null; final?: boolean } = {}) {
    super(409, "invalid_request_error", message, {
      code: options.code ?? "conflict",
      param: options.param ?? null,
      ...(options.final ? { headers: { "x-should-retry": "false" } } : {}),
    });
  }
}

export class RateLimitError extends ApiError {
  constructor(message: string, code: string) {
    super(429, "rate_limit_exceeded", message, { code });
  }
}

export class ModelUnavailableError extends ApiError {
  constructor(message: string, code: string | null = "model_unavailable", options: { retryAfterSeconds?: number } = {}) {
    super(503, "model_unavailable", message, {
      code,
      ...(options.retryAfterSeconds === undefined ? {} : { headers: { "retry-after": String(options.retryAfterSeconds) } }),
    });
  }
}

/** A dependency of the platform that can be away for a while. */
export type Dependency = "postgres" | "redis";

/** Seconds a client is asked to wait (Retry-After) before retrying after a dependency outage. */
export const DEPENDENCY_RETRY_AFTER_SECONDS = 2;

/**
 * PostgreSQL or Redis cannot be reached or did not answer in time: 503 service_unavailable with code
 * database_unavailable or redis_unavailable and a Retry-After. Never a 500, and never a hang.
 */
export class ServiceUnavailableError extends ApiError {
  readonly dependency: Dependency;
  /** `cause`: the failure underneath (for the log, never the client). */
  constructor(dependency: Dependency, cause?: unknown) {
    const what = dependency === "postgres" ? "The database" : "The job queue (Redis)";
    super(503, "service_unavailable", `${what} is temporarily unavailable. Retry after a short delay.`, {
      code: dependency === "postgres" ? "database_unavailable" : "redis_unavailable",
      headers: { "retry-after": String(DEPENDENCY_RETRY_AFTER_SECONDS) },
    });
    this.dependency = dependency;
    if (cause !== undefined) this.cause = cause;
  }
}

/**
 * Part of a reply was lost with Redis (restarted without its data) before what a read asks for: 503
 * `redis_unavailable`, as a request whose reply is lost that way ends, with a message that says a retry
 * of the same read cannot get it whole.
 */
export class ReplyLostError extends ServiceUnavailableError {
  constructor() {
    super("redis");
    this.message =
      "Part of this reply was lost with Redis (it restarted without its data) before the point asked for: it cannot be read whole from there. Resume after a later event, or send the request again.";
  }
}

/**
 * The API process answering a request stops (its shutdown grace is nearly over) before the reply ended.
 * A stream's job runs on: the client resumes it from another process with the completion's id
 * (x-completion-id) and the id of the last event it read; a whole answer's job is stopped, uncharged.
 */
export class ServerShuttingDownError extends ApiError {
  /** The job was taken off the queue before any worker took it: it never ran (its budget hold goes at once). */
  readonly neverRan: boolean;
  constructor(resumable: boolean, options: { neverRan?: boolean } = {}) {
    super(
      503,
      "service_unavailable",
      resumable
        ? "This API process is shutting down before the reply ended. The reply goes on: resume the stream with GET on it (the completion's or response's id, also in x-completion-id) with stream=true and the Last-Event-ID header (or a response's starting_after) set to the id of the last event you received."
        : "This API process is shutting down before the reply ended; the request was stopped. Retry it.",
      { code: "server_shutting_down", headers: { "retry-after": "1" } },
    );
    this.neverRan = options.neverRan === true;
  }
}

/** A model's job could not start now (no live worker, or none took it in time): 503, retry after a second. */
export function modelTemporarilyUnavailable(model: string): ModelUnavailableError {
  return new ModelUnavailableError(`The model '${model}' is temporarily unavailable. Retry after a short delay or use another model.`, "model_unavailable", {
    retryAfterSeconds: 1,
  });
}

export class InternalApiError extends ApiError {
  constructor(message = "The server had an error while processing your request.") {
    super(500, "api_error", message, { code: "internal_error" });
  }
}

export type ErrorBody = { error: { message: string; type: string; param?: string | null; code?: string | null } };

export function errorBody(error: ApiError): ErrorBody {
  if (error.bare) return { error: { message: error.message, type: error.type } };
  return { error: { message: error.message, type: error.type, param: error.param, code: error.code } };
}
