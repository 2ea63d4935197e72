import type { DeltaMessage } from "../../../contracts/deltaMessage.ts";

/** The end of a job taken off the queue for want of a worker (or room): a passing failure, charged nothing. */
export const UNAVAILABLE_END: DeltaMessage = {
  seq: 0,
  type: "error",
  error: { kind: "unavailable", message: "The model was temporarily unavailable: the request never started. Retry it.", param: null },
};

/** The end of a job taken off the queue by its API process's shutdown (its client told to retry). */
export const SHUTDOWN_END: DeltaMessage = {
  seq: 0,
  type: "error",
  error: {
    kind: "cancelled",
    code: "lost",
    message: "The API process the request came through stopped before it started: it never ran. Retry it.",
    param: null,
  },
};
