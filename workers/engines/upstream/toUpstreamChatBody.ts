import type { ChatRequest } from "../engine.ts";

export type UpstreamChatBodyOptions = {
  model: string;
  reasoning: boolean;
  /** Sent as a final assistant message the upstream continues (vLLM: continue_final_message, no generation prompt). */
  continueFrom?: string;
};

/**
 * The OpenAI wire body for a chat request, streamed with usage. Every parameter of the request is passed
 * through under its wire name; `extra` (backend-specific parameters such as `top_k`, `min_p`,
 * `chat_template_kwargs`) goes in untouched, but cannot override the model, the messages or streaming,
 * which this adapter relies on. With `continueFrom`, the reply begun is a final assistant message the
 * upstream continues (vLLM's `continue_final_message: true, add_generation_prompt: false`); those two
 * cannot be overridden either.
 *
 * The token bound was resolved by the API from max_tokens / max_completion_tokens. It is sent as
 * `max_completion_tokens` to a reasoning model (where the bound includes the thinking) and as the more
 * widely supported `max_tokens` otherwise; vLLM and SGLang treat both the same. A reasoning model whose
 * client set no bound (`maxTokensDefault`) is sent none: the backend's default applies.
 */
export function toUpstreamChatBody(request: ChatRequest, options: UpstreamChatBodyOptions): Record<string, unknown> {
  const body: Record<string, unknown> = { ...request.extra };
  body.model = options.model;
  if (options.continueFrom === undefined) {
    body.messages = request.messages;
  } else {
    body.messages = [...request.messages, { role: "assistant", content: options.continueFrom }];
    body.continue_final_message = true;
    body.add_generation_prompt = false;
  }
  body.stream = true;
  body.stream_options = { include_usage: true };
  // No bound from the client for a reasoning model: the backend's default applies (spec 4.1).
  if (!(options.reasoning && request.maxTokensDefault === true)) body[options.reasoning ? "max_completion_tokens" : "max_tokens"] = request.maxTokens;
  // Only what the client (or the model's registry defaults) set: the backend's own defaults apply otherwise.
  if (request.temperature !== undefined) body.temperature = request.temperature;
  if (request.topP !== undefined) body.top_p = request.topP;
  if (request.presencePenalty !== undefined) body.presence_penalty = request.presencePenalty;
  if (request.frequencyPenalty !== undefined) body.frequency_penalty = request.frequencyPenalty;
  if (request.seed !== undefined) body.seed = request.seed;
  if (request.stop !== undefined && request.stop.length > 0) body.stop = request.stop;
  if (request.logitBias !== undefined) body.logit_bias = request.logitBias;
  if (request.logprobs !== undefined) body.logprobs = request.logprobs;
  if (request.logprobs === true && request.topLogprobs !== undefined) body.top_logprobs = request.topLogprobs;
  if (request.tools !== undefined && request.tools.length > 0) body.tools = request.tools;
  if (request.toolChoice !== undefined) body.tool_choice = request.toolChoice;
  if (request.parallelToolCalls !== undefined) body.parallel_tool_calls = request.parallelToolCalls;
  if (request.responseFormat !== undefined) body.response_format = request.responseFormat;
  if (request.reasoningEffort !== undefined) body.reasoning_effort = request.reasoningEffort;
  return body;
}
