import type { AppDeps } from "../appDeps.ts";
import { ModelUnavailableError } from "../http/errors.ts";
import type { Principal } from "../auth/inferenceAuth.ts";
import { stateOf } from "../http/requestState.ts";
import type { InferenceServices } from "./inferenceServices.ts";
import type { Context } from "koa";

/** The inference services of this API process; an app built without them cannot serve models (503). */
export function requireInference(deps: AppDeps): InferenceServices {
  if (!deps.inference) throw new ModelUnavailableError("No model is served by this API process.");
  return deps.inference;
}

/** Who the request acts for, set by the inference auth middleware. */
export function principalOf(ctx: Context): Principal {
  const { principal } = stateOf(ctx);
  if (!principal) throw new Error("inference route mounted without inferenceAuth");
  return principal;
}
