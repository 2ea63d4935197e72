import { validate } from "../../../http/validate.ts";
import type { EndpointFamily } from "../shared/endpointFamily.ts";
import { cancelStoredCompletion, getStoredCompletion } from "../shared/storedCompletionHandlers.ts";
import { StoredCompletionQuerySchema } from "../shared/storedCompletionQuerySchema.ts";
import { completionHandler, textResponseShape } from "./completionHandler.ts";
import { COMPLETION_PARAMETERS } from "./completionParameters.ts";
import { CompletionRequestSchema } from "./completionRequestSchema.ts";

/** POST /v1/completions; GET and cancel of a stored text completion (its owner's keys only). */
export const completionsEndpoint: EndpointFamily = {
  name: "completions",
  served: { capability: "completions", parameters: COMPLETION_PARAMETERS },
  routes(router, deps) {
    router.post("/v1/completions", validate(CompletionRequestSchema), completionHandler(deps));
    router.get("/v1/completions/:completionId", validate(StoredCompletionQuerySchema, "query"), getStoredCompletion(deps, "completions", textResponseShape));
    router.post("/v1/completions/:completionId/cancel", cancelStoredCompletion(deps, "completions"));
  },
};
