import type { AppDeps } from "../../../appDeps.ts";
import { ModelUnavailableError } from "../../../http/errors.ts";

/** The inference services of an API process (composed by inferenceServices.ts, reached through AppDeps). */
export type InferenceServices = NonNullable<AppDeps["inference"]>;

/** The inference services of this API process; an app built without them cannot serve models (503). */
export function requireInference(deps: AppDeps): InferenceServices {
  if (!deps.inference) throw new ModelUnavailableError("No model is served by this API process.");
  return deps.inference;
}
