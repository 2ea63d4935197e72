import { z } from "zod";
import type { EngineChatRequest } from "../../../../contracts/engineRequestSchemas.ts";
import type { RegisteredModel } from "../../../../models/modelRegistry.ts";
import { InvalidRequestError } from "../../../http/errors.ts";
import { parseWith } from "../../../http/validate.ts";
import { CHAT_PARAMETERS } from "../chat/chatParameters.ts";
import type { ChatCompletionRequest } from "../chat/chatCompletionRequestSchema.ts";
import { toEngineChatRequest } from "../chat/toEngineChatRequest.ts";
import { checkRequestSchemas } from "../shared/jsonSchemas/checkRequestSchemas.ts";
import type { JsonSchemaValidator } from "../shared/jsonSchemas/jsonSchemaProblem.ts";
import { type StoredItem, toChatMessages } from "./responseItems.ts";
import { assertModelTakes } from "../shared/requestParameters.ts";
import { RESPONSE_PARAMETERS } from "./responseParameters.ts";
import { RESPONSE_REQUEST_FIELDS, type ResponseRequest } from "./responseRequestSchema.ts";
import { LOGPROBS_INCLUDE } from "./responseSchemas.ts";

/**
 * The request settings a Response object echoes: what applied to the generation where the platform chose
 * it (the output cap and the sampling, after the model's defaults), OpenAI's defaults elsewhere.
 */
export type ResponseSettings = {
  instructions: string | null;
  max_output_tokens: number | null;
  max_tool_calls: number | null;
  metadata: Record<string, string>;
  parallel_tool_calls: boolean;
  previous_response_id: string | null;
  prompt_cache_key: string | null;
  prompt_cache_retention: string | null;
  reasoning: { effort: string | null; summary: string | null };
  safety_identifier: string | null;
  service_tier: "auto" | "default";
  store: boolean;
  temperature: number | null;
  text: { format: Record<string, unknown>; verbosity?: string };
  tool_choice: unknown;
  tools: Record<string, unknown>[];
  top_logprobs: number | null;
  top_p: number | null;
  truncation: "auto" | "disabled";
  user: string | null;
  /** Whether the output text's logprobs were asked for (include: message.output_text.logprobs). */
  logprobs: boolean;
};

/**
 * `request` is the engine request toResponseChatRequest built from `body`: a response without
 * max_output_tokens reports the cap that applied (the chat default, 150), or null when the model's
 * backend chose it; temperature and top_p report the model's defaults when the client set none.
 */
export function responseSettings(body: ResponseRequest, request: EngineChatRequest): ResponseSettings {
  return {
    instructions: body.instructions ?? null,
    max_output_tokens: body.max_output_tokens ?? (request.maxTokensDefault ? null : request.maxTokens),
    max_tool_calls: body.max_tool_calls ?? null,
    metadata: body.metadata ?? {},
    parallel_tool_calls: body.parallel_tool_calls ?? true,
    previous_response_id: body.previous_response_id ?? null,
    prompt_cache_key: body.prompt_cache_key ?? null,
    prompt_cache_retention: body.prompt_cache_retention ?? null,
    reasoning: { effort: body.reasoning?.effort ?? null, summary: body.reasoning?.summary ?? null },
    safety_identifier: body.safety_identifier ?? null,
    service_tier: body.service_tier === "auto" || !body.service_tier ? "default" : body.service_tier,
    store: body.store !== false,
    temperature: request.temperature ?? 1,
    text: {
      format: body.text?.format ? withoutNulls(body.text.format) : { type: "text" },
      ...(body.text?.verbosity ? { verbosity: body.text.verbosity } : {}),
    },
    tool_choice: body.tool_choice ?? "auto",
    tools: (body.tools ?? []).map((tool) => ({
      type: "function",
      name: tool.name,
      description: tool.description ?? null,
      parameters: tool.parameters ?? null,
      strict: tool.strict ?? true,
    })),
    top_logprobs: body.top_logprobs ?? null,
    top_p: request.topP ?? 1,
    truncation: body.truncation ?? "disabled",
    user: body.user ?? null,
    logprobs: (body.include ?? []).includes(LOGPROBS_INCLUDE),
  };
}

/**
 * The engine request of a response, from the instructions and the whole context (the previous responses'
 * items, then this input): its JSON Schemas checked, the capabilities its fields need (RESPONSE_PARAMETERS:
 * a 400 naming the first Responses field the model cannot take), then the same checks and defaults as a
 * chat completion's (max tokens, reasoning efforts, backend parameters; a 400 names the Responses field).
 */
export function toResponseChatRequest(body: ResponseRequest, context: StoredItem[], model: RegisteredModel, schemas: JsonSchemaValidator): EngineChatRequest {
  const messages = toChatMessages(body.instructions, context);
  if (messages.length === 0 || messages.every((m) => m.role === "system")) {
    throw new InvalidRequestError("Invalid 'input': it holds no message for the model to answer.", { param: "input", code: "invalid_value" });
  }
  const format = body.text?.format;
  const extra = chatOwnFieldsChecked(refuseChatOnlyFields(Object.fromEntries(Object.entries(body).filter(([name]) => !RESPONSE_REQUEST_FIELDS.has(name)))));
  const logprobs = (body.include ?? []).includes(LOGPROBS_INCLUDE) || (body.top_logprobs ?? 0) > 0;
  const chat: ChatCompletionRequest = {
    ...extra,
    model: body.model,
    messages,
    ...(body.max_output_tokens != null ? { max_completion_tokens: body.max_output_tokens } : {}),
    ...(body.temperature != null ? { temperature: body.temperature } : {}),
    ...(body.top_p != null ? { top_p: body.top_p } : {}),
    ...(body.tools?.length
      ? {
          tools: body.tools.map((tool) => ({
            type: "function" as const,
            function: {
              name: tool.name,
              ...(tool.description != null ? { description: tool.description } : {}),
              ...(tool.parameters != null ? { parameters: tool.parameters } : {}),
              ...(tool.strict != null ? { strict: tool.strict } : {}),
            },
          })),
        }
      : {}),
    ...(body.tool_choice && body.tools?.length
      ? { tool_choice: typeof body.tool_choice === "string" ? body.tool_choice : { type: "function" as const, function: { name: body.tool_choice.name } } }
      : {}),
    ...(body.parallel_tool_calls != null && body.tools?.length ? { parallel_tool_calls: body.parallel_tool_calls } : {}),
    ...(format && format.type !== "text"
      ? {
          response_format:
            format.type === "json_schema"
              ? {
                  type: "json_schema" as const,
                  json_schema: {
                    name: format.name,
                    schema: format.schema,
                    ...(format.description != null ? { description: format.description } : {}),
                    ...(format.strict != null ? { strict: format.strict } : {}),
                  },
                }
              : { type: "json_object" as const },
        }
      : {}),
    ...(body.reasoning?.effort ? { reasoning_effort: body.reasoning.effort } : {}),
    ...(logprobs ? { logprobs: true, ...(body.top_logprobs != null ? { top_logprobs: body.top_logprobs } : {}) } : {}),
  };
  try {
    checkRequestSchemas(chat, schemas, model.engine.type === "embedded");
  } catch (error) {
    throw renamed(error);
  }
  assertModelTakes(RESPONSE_PARAMETERS, body, model);
  try {
    return toEngineChatRequest(chat, model);
  } catch (error) {
    throw renamed(error);
  }
}

/**
 * Chat fields the Responses API has a field of its own for (or none): refused, as OpenAI refuses them,
 * rather than applied while the Response object echoes its own field (`response_format` over
 * `text.format`) or dropped unseen (`messages`). Null is taken as not set.
 */
const CHAT_ONLY_FIELDS: Readonly<Record<string, string | null>> = {
  messages: "input",
  response_format: "text.format",
  logprobs: "include",
  max_tokens: "max_output_tokens",
  max_completion_tokens: "max_output_tokens",
  reasoning_effort: "reasoning.effort",
  verbosity: "text.verbosity",
  functions: "tools",
  function_call: "tool_choice",
  n: null,
  prediction: null,
  modalities: null,
  audio: null,
  web_search_options: null,
};

/** The Responses API's own fields that are not served: refused (null: not set), saying what to use instead. */
const RESPONSE_FIELDS_NOT_SERVED: Readonly<Record<string, string>> = {
  conversation: "Conversations are not served: chain responses with 'previous_response_id'.",
  prompt: "Stored prompts are not served: send the prompt's text as 'instructions' and 'input'.",
  context_management: "Context compaction is not served: a context longer than the model's is a 400.",
};

function refuseChatOnlyFields(extra: Record<string, unknown>): Record<string, unknown> {
  const rest: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(extra)) {
    if (value !== null && value !== undefined && Object.hasOwn(RESPONSE_FIELDS_NOT_SERVED, name)) {
      throw new InvalidRequestError(`Unsupported parameter: '${name}' is not supported here. ${RESPONSE_FIELDS_NOT_SERVED[name]}`, {
        param: name,
        code: "unsupported_parameter",
      });
    }
    if (!Object.hasOwn(CHAT_ONLY_FIELDS, name)) rest[name] = value;
    if (value === null || value === undefined || !Object.hasOwn(CHAT_ONLY_FIELDS, name)) continue;
    const moved = CHAT_ONLY_FIELDS[name];
    throw new InvalidRequestError(
      moved
        ? `Unsupported parameter: '${name}'. In the Responses API, this parameter has moved to '${moved}'.`
        : `Unsupported parameter: '${name}' is not supported with the Responses API.`,
      { param: name, code: "unsupported_parameter" },
    );
  }
  return rest;
}

/**
 * The fields of a Responses request that are not the Responses API's own: chat's own fields among them
 * (`seed`, `stop`, `presence_penalty`, `logit_bias`, ...: honoured as for chat) checked with chat's
 * schemas (a 400 naming the field, as chat gives), the rest (backend parameters) as they are.
 */
function chatOwnFieldsChecked(extra: Record<string, unknown>): Record<string, unknown> {
  const own = Object.keys(extra).filter((name) => Object.hasOwn(CHAT_PARAMETERS, name)) as (keyof typeof CHAT_PARAMETERS)[];
  if (own.length === 0) return extra;
  const schema = z.object(Object.fromEntries(own.map((name) => [name, CHAT_PARAMETERS[name].schema])));
  return { ...extra, ...parseWith(schema, Object.fromEntries(own.map((name) => [name, extra[name]]))) };
}

/** A chat parameter named in a 400 is given its Responses name. */
const RENAMED: Record<string, string> = {
  max_completion_tokens: "max_output_tokens",
  response_format: "text.format",
  reasoning_effort: "reasoning.effort",
  logprobs: "include",
  "response_format.json_schema.schema": "text.format.schema",
};

/** A place inside a chat field named in a 400, given its Responses place (`tools[0].function.parameters` -> `tools[0].parameters`). */
function renamedPlace(param: string): string | null {
  if (Object.hasOwn(RENAMED, param)) return RENAMED[param]!;
  const tool = /^tools\[(\d+)\]\.function\.(.+)$/.exec(param);
  if (tool) return `tools[${tool[1]}].${tool[2]}`;
  if (param.startsWith("response_format.json_schema.schema")) return `text.format.schema${param.slice("response_format.json_schema.schema".length)}`;
  return null;
}

function renamed(error: unknown): unknown {
  if (!(error instanceof InvalidRequestError) || !error.param) return error;
  const to = renamedPlace(error.param);
  if (to === null) return error;
  return new InvalidRequestError(error.message.replaceAll(error.param, to), { param: to, code: error.code ?? "invalid_value" });
}

function withoutNulls(value: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== null && v !== undefined));
}
