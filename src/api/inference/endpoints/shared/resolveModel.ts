import { InvalidRequestError } from "../../../http/errors.ts";
import type { ModelRegistry, RegisteredModel } from "../../../../models/modelRegistry.ts";

export type ServedKind = "chat" | "completions" | "embeddings";

const ENDPOINT_OF: Record<ServedKind, string> = {
  chat: "/v1/chat/completions",
  completions: "/v1/completions",
  embeddings: "/v1/embeddings",
};

/**
 * The registry entry of the requested model, which must serve this endpoint. An unknown model is an
 * invalid parameter (400, code model_not_found); a model without the capability -> 400 with param "model",
 * naming `endpoint` (the one the client called: /v1/responses runs as chat).
 */
export function resolveModel(registry: ModelRegistry, id: string, kind: ServedKind, endpoint: string = ENDPOINT_OF[kind]): RegisteredModel {
  const model = registry.get(id);
  if (!model) {
    throw new InvalidRequestError(`The model '${id}' does not exist. List the available models with GET /v1/models.`, {
      param: "model",
      code: "model_not_found",
    });
  }
  if (!model.capabilities[kind]) {
    throw new InvalidRequestError(`The model '${id}' does not support ${endpoint}.`, { param: "model", code: "model_not_supported" });
  }
  return model;
}

/** 400 naming a parameter the chosen model does not support. */
export function unsupportedParameter(model: RegisteredModel, param: string, what: string): InvalidRequestError {
  return new InvalidRequestError(`The model '${model.id}' does not support ${what}.`, { param, code: "unsupported_parameter" });
}
