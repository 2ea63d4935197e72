import type { JobError } from "../../src/contracts/deltaMessage.ts";
import { EngineError } from "../engines/engine.ts";

/** What the client is told of an engine failure: an engine's own refusal as it said it, anything else as an internal failure. */
export function toJobError(error: unknown): JobError {
  if (error instanceof EngineError) {
    return { kind: error.kind, message: error.kind === "internal" ? "The model failed while generating." : error.message, param: error.param };
  }
  return { kind: "internal", message: "The model failed while generating.", param: null };
}
