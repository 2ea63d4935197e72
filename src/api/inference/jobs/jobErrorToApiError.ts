import { ConflictError, InternalApiError, InvalidRequestError, ModelUnavailableError, type ApiError } from "../../http/errors.ts";
import type { JobError } from "../../../contracts/deltaMessage.ts";

/**
 * A worker's error message as the API's error: engine refusals are 400, unavailability 503, a cancelled
 * completion 409 completion_cancelled (as a streamed error event once output was sent), the rest 500.
 */
export function jobErrorToApiError(error: JobError): ApiError {
  if (error.kind === "invalid_request") return new InvalidRequestError(error.message, { param: error.param, code: error.code ?? "invalid_value" });
  if (error.kind === "unavailable") return new ModelUnavailableError(error.message);
  if (error.kind === "cancelled") return new ConflictError(error.message, { code: "completion_cancelled", final: true });
  return new InternalApiError(error.message);
}
