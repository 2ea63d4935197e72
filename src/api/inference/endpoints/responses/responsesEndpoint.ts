import { validate } from "../../../http/validate.ts";
import type { EndpointFamily } from "../shared/endpointFamily.ts";
import { cancelResponseHandler, createResponseHandler, deleteResponseHandler, inputItemsHandler, retrieveResponseHandler } from "./responseHandlers.ts";
import { InputItemsQuerySchema, ResponseRequestSchema, RetrieveResponseQuerySchema } from "./responseRequestSchema.ts";

/**
 * The Responses API: POST /v1/responses, GET / DELETE /v1/responses/{id}, its cancel and its input_items
 * (the owner's keys only). Served by chat models (its requests become chat requests), so it lists no
 * parameters of its own in the models API.
 */
export const responsesEndpoint: EndpointFamily = {
  name: "responses",
  routes(router, deps) {
    router.post("/v1/responses", validate(ResponseRequestSchema), createResponseHandler(deps));
    router.get("/v1/responses/:responseId", validate(RetrieveResponseQuerySchema, "query"), retrieveResponseHandler(deps));
    router.post("/v1/responses/:responseId/cancel", cancelResponseHandler(deps));
    router.delete("/v1/responses/:responseId", deleteResponseHandler(deps));
    router.get("/v1/responses/:responseId/input_items", validate(InputItemsQuerySchema, "query"), inputItemsHandler(deps));
  },
};
