import { MODEL_CAPABILITIES, type ModelCapability, pickCapabilities } from "../../models/modelCapabilities.ts";
import type { RegisteredModel } from "../../models/modelRegistry.ts";

/** The reasoning_effort values of a reasoning model whose registry entry names none. */
export const DEFAULT_REASONING_EFFORTS: readonly string[] = ["low", "medium", "high"];

const SAMPLING = ["max_tokens", "temperature", "top_p", "stop", "presence_penalty", "frequency_penalty", "seed", "logit_bias", "user"];
const STREAMING = ["stream", "stream_options"];

/** The request parameters (OpenAI's names) each capability lets a client send, beyond `model` and the prompt itself. */
const PARAMETERS_OF: { readonly [C in ModelCapability]: (model: RegisteredModel) => readonly string[] } = {
  chat: () => [...SAMPLING, ...STREAMING, "max_completion_tokens"],
  completions: () => [...SAMPLING, ...STREAMING],
  embeddings: (model) => ["encoding_format", ...(model.truncatable_embeddings ? ["dimensions"] : [])],
  tools: () => ["tools", "tool_choice", "parallel_tool_calls"],
  json_schema: () => ["response_format"],
  logprobs: () => ["logprobs", "top_logprobs"],
  reasoning: () => ["reasoning_effort"],
};

/** The request parameters a model takes, beyond `model` and the prompt itself (messages / prompt / input): its capabilities', then its extra ones. */
export function supportedParameters(model: RegisteredModel): string[] {
  const parameters = new Set<string>();
  for (const capability of MODEL_CAPABILITIES) {
    if (model.capabilities[capability]) for (const name of PARAMETERS_OF[capability](model)) parameters.add(name);
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
