import { MODEL_CAPABILITIES, pickCapabilities } from "../../models/modelCapabilities.ts";
import { ENDPOINT_FAMILIES } from "../inference/endpointFamilies.ts";
import { DEFAULT_REASONING_EFFORTS } from "../inference/endpoints/chat/chatParameters.ts";
import { listedParameters } from "../inference/endpoints/shared/requestParameters.ts";
import type { RegisteredModel } from "../../models/modelRegistry.ts";

/**
 * The request parameters a model takes, beyond `model` and the prompt itself (messages / prompt / input):
 * those the parameter tables of the endpoint families it serves list (ENDPOINT_FAMILIES), by capability
 * (the endpoints' own first, then tools, json_schema, logprobs, reasoning), then its extra ones.
 */
export function supportedParameters(model: RegisteredModel): string[] {
  const parameters = new Set<string>();
  for (const capability of MODEL_CAPABILITIES) {
    if (!model.capabilities[capability]) continue;
    for (const { served } of ENDPOINT_FAMILIES) {
      if (!served || !model.capabilities[served.capability]) continue;
      for (const parameter of listedParameters(served.parameters, model)) {
        if ((parameter.capability ?? served.capability) === capability) parameters.add(parameter.name);
      }
    }
  }
  for (const name of model.extra_parameters ?? []) parameters.add(name);
  return [...parameters];
}

/**
 * One entry of the models API: OpenAI's shape (id, object, created, owned_by) plus what a client needs
 * to choose a model (OpenRouter-style extra fields): context length, CHF prices per million tokens,
 * capabilities, the request parameters it takes, its reasoning efforts and embedding size where they
 * apply.
 */
export function modelBody(model: RegisteredModel) {
  return {
    id: model.id,
    object: "model" as const,
    created: model.created ?? 0,
    owned_by: model.owned_by,
    context_length: model.context_length,
    pricing: {
      currency: "CHF",
      input_chf_per_million_tokens: model.pricing.input_per_million_chf,
      output_chf_per_million_tokens: model.pricing.output_per_million_chf,
    },
    capabilities: pickCapabilities(model.capabilities),
    supported_parameters: supportedParameters(model),
    ...(model.capabilities.reasoning ? { reasoning_efforts: model.reasoning_efforts ?? DEFAULT_REASONING_EFFORTS } : {}),
    ...(model.embedding_dimensions === undefined ? {} : { embedding_dimensions: model.embedding_dimensions }),
  };
}
