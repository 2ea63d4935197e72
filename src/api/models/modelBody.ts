import type { RegisteredModel } from "../../models/modelRegistry.ts";

/** The reasoning_effort values of a reasoning model whose registry entry names none. */
export const DEFAULT_REASONING_EFFORTS: readonly string[] = ["low", "medium", "high"];

const SAMPLING = ["max_tokens", "temperature", "top_p", "stop", "presence_penalty", "frequency_penalty", "seed", "logit_bias", "user"];
const STREAMING = ["stream", "stream_options"];

/** The request parameters a model takes, beyond `model` and the prompt itself (messages / prompt / input). */
export function supportedParameters(model: RegisteredModel): string[] {
  const can = model.capabilities;
  const parameters = new Set<string>();
  if (can.chat || can.completions) for (const name of [...SAMPLING, ...STREAMING]) parameters.add(name);
  if (can.chat) parameters.add("max_completion_tokens");
  if (can.tools) for (const name of ["tools", "tool_choice", "parallel_tool_calls"]) parameters.add(name);
  if (can.json_schema) parameters.add("response_format");
  if (can.logprobs) for (const name of ["logprobs", "top_logprobs"]) parameters.add(name);
  if (can.reasoning) parameters.add("reasoning_effort");
  if (can.embeddings) for (const name of ["encoding_format", ...(model.truncatable_embeddings ? ["dimensions"] : [])]) parameters.add(name);
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
    capabilities: model.capabilities,
    supported_parameters: supportedParameters(model),
    ...(model.capabilities.reasoning ? { reasoning_efforts: model.reasoning_efforts ?? DEFAULT_REASONING_EFFORTS } : {}),
    ...(model.embedding_dimensions === undefined ? {} : { embedding_dimensions: model.embedding_dimensions }),
  };
}
