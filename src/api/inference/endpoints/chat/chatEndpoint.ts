import { validate } from "../../../http/validate.ts";
import type { EndpointFamily } from "../shared/endpointFamily.ts";
import { cancelStoredCompletion, getStoredCompletion } from "../shared/storedCompletionHandlers.ts";
import { StoredCompletionQuerySchema } from "../shared/storedCompletionQuerySchema.ts";
import { chatCompletionHandler, chatResponseShape } from "./chatCompletionHandler.ts";
import { ChatCompletionRequestSchema } from "./chatCompletionRequestSchema.ts";
import { CHAT_PARAMETERS } from "./chatParameters.ts";

/** POST /v1/chat/completions; GET and cancel of a stored chat completion (its owner's keys only). */
export const chatEndpoint: EndpointFamily = {
  name: "chat.completions",
  served: { capability: "chat", parameters: CHAT_PARAMETERS },
  routes(router, deps) {
    router.post("/v1/chat/completions", validate(ChatCompletionRequestSchema), chatCompletionHandler(deps));
    router.get(
      "/v1/chat/completions/:completionId",
      validate(StoredCompletionQuerySchema, "query"),
      getStoredCompletion(deps, "chat.completions", chatResponseShape),
    );
    router.post("/v1/chat/completions/:completionId/cancel", cancelStoredCompletion(deps, "chat.completions"));
  },
};
