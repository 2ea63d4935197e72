import { InvalidRequestError } from "../../../http/errors.ts";
import type { EngineChatRequest } from "../../../../contracts/engineRequestSchemas.ts";
import type { RegisteredModel } from "../../../../models/modelRegistry.ts";
import { engineTraits } from "../../../../models/engineTraits.ts";
import { assertModelTakes } from "../shared/requestParameters.ts";
import { samplingParams } from "../shared/samplingSchemas.ts";
import { CHAT_REQUEST_FIELDS, type ChatCompletionRequest, type ChatMessageInput } from "./chatCompletionRequestSchema.ts";
import { backendParameters } from "../shared/backendParameters.ts";
import { CHAT_PARAMETERS, DEFAULT_REASONING_EFFORTS } from "./chatParameters.ts";

export const CHAT_DEFAULT_MAX_TOKENS = 150;

/** OpenAI's chat fields this service does not serve (docs/compatibility.md), and what to use instead. */
const CHAT_FIELDS_NOT_SERVED: Readonly<Record<string, string>> = {
  functions: "Use 'tools' instead (OpenAI deprecated 'functions').",
  function_call: "Use 'tool_choice' instead (OpenAI deprecated 'function_call').",
  modalities: "Replies are text only.",
  audio: "Replies are text only.",
  web_search_options: "No web search is served.",
};

/**
 * Checks the extended parameters against the model's capabilities (CHAT_PARAMETERS: 400 naming the
 * first unsupported one), applies the spec's defaults and builds the engine request the job carries.
 */
export function toEngineChatRequest(body: ChatCompletionRequest, model: RegisteredModel): EngineChatRequest {
  const can = model.capabilities;
  assertModelTakes(CHAT_PARAMETERS, body, model);
  const hasTools = (body.tools?.length ?? 0) > 0;
  const format = body.response_format;
  const efforts = model.reasoning_efforts ?? DEFAULT_REASONING_EFFORTS;
  if (body.reasoning_effort && !efforts.includes(body.reasoning_effort)) {
    throw new InvalidRequestError(`Invalid 'reasoning_effort': the model '${model.id}' takes ${efforts.map((e) => `'${e}'`).join(", ")}.`, {
      param: "reasoning_effort",
      code: "invalid_value",
    });
  }
  const extra = backendParameters(body, CHAT_REQUEST_FIELDS, model, CHAT_FIELDS_NOT_SERVED);

  const maxParam = body.max_completion_tokens != null ? "max_completion_tokens" : "max_tokens";
  const clientMax = body.max_completion_tokens ?? body.max_tokens;
  // An upstream reasoning model without a bound from the client: its backend's default applies (spec
  // 4.1); the context length bounds what it can generate, so that is what admission holds money for.
  const backendDefault = clientMax == null && can.reasoning && engineTraits(model).backendDefaultMaxTokens;
  const maxTokens = clientMax ?? (backendDefault ? model.context_length : CHAT_DEFAULT_MAX_TOKENS);
  if (!backendDefault && maxTokens >= model.context_length) {
    throw new InvalidRequestError(`${maxParam} is too large: ${maxTokens}. This model's context length is ${model.context_length} tokens.`, {
      param: maxParam,
      code: "invalid_value",
    });
  }
  return {
    messages: body.messages.map(toEngineMessage),
    maxTokens,
    ...(backendDefault ? { maxTokensDefault: true } : {}),
    ...(clientMax != null ? { maxTokensGiven: true } : {}),
    ...samplingParams(body, model.defaults),
    ...(body.logprobs === true ? { logprobs: true, ...(body.top_logprobs != null ? { topLogprobs: body.top_logprobs } : {}) } : {}),
    ...(hasTools ? { tools: body.tools!.map((t) => ({ type: "function" as const, function: withoutNulls(t.function) })) } : {}),
    ...(body.tool_choice ? { toolChoice: body.tool_choice } : {}),
    ...(body.parallel_tool_calls != null ? { parallelToolCalls: body.parallel_tool_calls } : {}),
    ...(format ? { responseFormat: format.type === "json_schema" ? { type: "json_schema", json_schema: withoutNulls(format.json_schema) } : format } : {}),
    ...(body.reasoning_effort ? { reasoningEffort: body.reasoning_effort } : {}),
    ...(extra ? { extra } : {}),
  };
}

function toEngineMessage(message: ChatMessageInput): EngineChatRequest["messages"][number] {
  switch (message.role) {
    case "system":
    case "developer":
      return { role: "system", content: textOf(message.content), ...(message.name ? { name: message.name } : {}) };
    case "user":
      return { role: "user", content: textOf(message.content), ...(message.name ? { name: message.name } : {}) };
    case "assistant":
      return {
        role: "assistant",
        content: message.content == null ? null : textOf(message.content),
        ...(message.name ? { name: message.name } : {}),
        ...(message.tool_calls?.length ? { tool_calls: message.tool_calls } : {}),
      };
    case "tool":
      return { role: "tool", content: textOf(message.content), tool_call_id: message.tool_call_id };
  }
}

function textOf(content: string | { type: "text"; text: string }[]): string {
  return typeof content === "string" ? content : content.map((part) => part.text).join("");
}

/** Drops null-valued keys (`strict: null` from some clients means "not set"). */
function withoutNulls<T extends Record<string, unknown>>(value: T): { [K in keyof T]: Exclude<T[K], null> } {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== null)) as { [K in keyof T]: Exclude<T[K], null> };
}
