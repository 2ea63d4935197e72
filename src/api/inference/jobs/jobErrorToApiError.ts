import { ApiError, ConflictError, InternalApiError, InvalidRequestError, ModelUnavailableError } from "../../http/errors.ts";
import type { JobError, Usage } from "../../../contracts/deltaMessage.ts";

/** A cancelled completion: 409 completion_cancelled, final, with what its worker charged for it (when it said). */
export class CompletionCancelledError extends ConflictError {
  readonly charged: Usage | null;
  constructor(message: string, charged: Usage | null) {
    super(message, { code: "completion_cancelled", final: true });
    this.charged = charged;
  }
}

/**
 * A completion stopped, charging nothing, because the request that started it ended early (its API
 * process's shutdown, its reply lost with Redis): its client was told to retry. Told to a client that
 * attached to it (an Idempotency-Key retry, a resume through another process): a 503 to send the request
 * again (it was a final 409 completion_cancelled, which a client is told never to retry).
 */
export class RequestStoppedError extends ApiError {
  constructor() {
    super(
      503,
      "service_unavailable",
      "The request this completion belongs to was stopped before its reply reached its client (its API process stopped, or Redis lost the reply); nothing was charged for it. Send the request again.",
      { code: "request_stopped", headers: { "retry-after": "1" } },
    );
  }
}

/** When a client may retry a request whose engine was unavailable (an upstream refusing, overloaded or away). */
const UNAVAILABLE_RETRY_AFTER_S = 5;

/**
 * A worker's error message as the API's error: engine refusals are 400, unavailability 503, a cancelled
 * completion 409 completion_cancelled (as a streamed error event once output was sent; `charged`: the
 * usage the message carries, what was charged), the rest 500.
 */
export function jobErrorToApiError(error: JobError, charged?: Usage): ApiError {
  if (error.kind === "invalid_request") return new InvalidRequestError(error.message, { param: error.param, code: error.code ?? "invalid_value" });
  if (error.kind === "unavailable") return new ModelUnavailableError(error.message, "model_unavailable", { retryAfterSeconds: UNAVAILABLE_RETRY_AFTER_S });
  if (error.kind === "cancelled" && error.code === "lost" && !(charged && charged.promptTokens + charged.completionTokens > 0))
    return new RequestStoppedError();
  if (error.kind === "cancelled") return new CompletionCancelledError(error.message, charged ?? null);
  return new InternalApiError(error.message);
}
