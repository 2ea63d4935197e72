import { validate } from "../../../http/validate.ts";
import type { EndpointFamily } from "../shared/endpointFamily.ts";
import { cancelResponseHandler } from "./cancelResponseHandler.ts";
import { createResponseHandler, deleteResponseHandler, inputItemsHandler, retrieveResponseHandler } from "./responseHandlers.ts";
import { RESPONSE_PARAMETERS } from "./responseParameters.ts";
import { InputItemsQuerySchema, ResponseRequestSchema, RetrieveResponseQuerySchema } from "./responseRequestSchema.ts";

/**
 * The Responses API: POST /v1/responses, GET / DELETE /v1/responses/{id}, its cancel and its input_items
 * (the owner's keys only). Served by chat models (its requests become chat requests): the models API
 * lists its parameters (RESPONSE_PARAMETERS) for every chat model, beside chat's.
 */
export const responsesEndpoint: EndpointFamily = {
  name: "responses",
  served: { capability: "chat", parameters: RESPONSE_PARAMETERS },
  routes(router, deps) {
    router.post("/v1/responses", validate(ResponseRequestSchema), createResponseHandler(deps));
    router.get("/v1/responses/:responseId", validate(RetrieveResponseQuerySchema, "query"), retrieveResponseHandler(deps));
    router.post("/v1/responses/:responseId/cancel", cancelResponseHandler(deps));
    router.delete("/v1/responses/:responseId", deleteResponseHandler(deps));
    router.get("/v1/responses/:responseId/input_items", validate(InputItemsQuerySchema, "query"), inputItemsHandler(deps));
  },
};
