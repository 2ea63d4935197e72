import { tokenBoundSchema } from "../shared/samplingSchemas.ts";
import { z } from "zod";
import { itemsInOrder } from "../shared/itemsInOrder.ts";
import type { ParameterTable } from "../shared/requestParameters.ts";
import { INCLUDABLE, InputItemSchema, LOGPROBS_INCLUDE, ResponseToolChoiceSchema, ResponseToolSchema, TextFormatSchema } from "./responseSchemas.ts";
import { MetadataSchema } from "../shared/metadataSchema.ts";

/** What the capability checks read of a Responses request. */
type ResponseParameterBody = {
  tools?: unknown[] | null;
  tool_choice?: unknown;
  parallel_tool_calls?: boolean | null;
  text?: { format?: { type: string } | null } | null;
  reasoning?: { effort?: string | null } | null;
  include?: readonly string[] | null;
  top_logprobs?: number | null;
};

const hasTools = (body: ResponseParameterBody) => (body.tools?.length ?? 0) > 0;

/**
 * Every parameter of POST /v1/responses (OpenAI's Responses API), in the order of its schema: the
 * request schema (responseRequestSchema.ts), the capability checks (toResponseChatRequest: a 400 naming
 * the Responses field, e.g. `text.format`) and the models API's `supported_parameters` of a chat model
 * derive from it. A response runs as a chat completion, so a field needs the capability its chat
 * counterpart needs. Fields beyond these are backend-specific parameters, as for chat completions.
 */
export const RESPONSE_PARAMETERS = {
  model: { schema: z.string().min(1), policy: "honoured", listed: false },
  input: { schema: z.union([z.string(), itemsInOrder(InputItemSchema, z.array(z.unknown()).min(1))]), policy: "honoured", listed: false },
  /** A system message before the context; not carried over by previous_response_id. */
  instructions: { schema: z.string().nullish(), policy: "honoured" },
  max_output_tokens: { schema: tokenBoundSchema.nullish(), policy: "honoured" },
  temperature: { schema: z.number().min(0).max(2).nullish(), policy: "honoured" },
  top_p: { schema: z.number().min(0).max(1).nullish(), policy: "honoured" },
  tools: { schema: z.array(ResponseToolSchema).max(128).nullish(), policy: "honoured", capability: "tools", uses: hasTools },
  /** Given to the model only with tools (without them, `none` and `auto` change nothing). */
  tool_choice: {
    schema: ResponseToolChoiceSchema.nullish(),
    policy: "honoured",
    capability: "tools",
    uses: (body) => hasTools(body) && Boolean(body.tool_choice) && body.tool_choice !== "none",
  },
  parallel_tool_calls: {
    schema: z.boolean().nullish(),
    policy: "honoured",
    capability: "tools",
    uses: (body) => hasTools(body) && body.parallel_tool_calls !== null && body.parallel_tool_calls !== undefined,
  },
  /** `text.format` (as chat's response_format) is honoured; `text.verbosity` is accepted and ignored. */
  text: {
    schema: z.looseObject({ format: TextFormatSchema.nullish(), verbosity: z.enum(["low", "medium", "high"]).nullish() }).nullish(),
    policy: "honoured",
    capability: "json_schema",
    uses: (body) => Boolean(body.text?.format) && body.text?.format?.type !== "text",
    param: "text.format",
    unsupported: (body) => `text.format ${body.text?.format?.type}`,
  },
  /** `reasoning.effort` (as chat's reasoning_effort, checked against the model's values) is honoured; `reasoning.summary` is accepted and ignored. */
  reasoning: {
    schema: z.looseObject({ effort: z.string().min(1).max(32).nullish(), summary: z.string().nullish(), generate_summary: z.string().nullish() }).nullish(),
    policy: "honoured",
    capability: "reasoning",
    uses: (body) => Boolean(body.reasoning?.effort),
    param: "reasoning.effort",
    unsupported: () => "reasoning.effort (it is not a reasoning model)",
  },
  /** The caller's own earlier response (ended) whose context, input and output come before this input. */
  previous_response_id: { schema: z.string().min(1).max(200).nullish(), policy: "honoured" },
  /** Default true: kept for the retention period; false: nothing is kept past the request. */
  store: { schema: z.boolean().nullish(), policy: "honoured" },
  background: { schema: z.boolean().nullish(), policy: "honoured" },
  stream: { schema: z.boolean().nullish(), policy: "honoured" },
  stream_options: { schema: z.looseObject({ include_obfuscation: z.boolean().nullish() }).nullish(), policy: "ignored" },
  /** Echoed in the Response object: 16 string pairs at most (keys up to 64 characters, values up to 512). */
  metadata: {
    schema: MetadataSchema,
    policy: "ignored",
  },
  /** End-user id for the caller's own tracking (listed, as for chat: a client may send it to any chat model). */
  user: { schema: z.string().max(256).nullish(), policy: "ignored", listed: true },
  safety_identifier: { schema: z.string().max(256).nullish(), policy: "ignored" },
  prompt_cache_key: { schema: z.string().max(256).nullish(), policy: "ignored" },
  prompt_cache_retention: { schema: z.enum(["in-memory", "24h"]).nullish(), policy: "ignored" },
  /** Bounds OpenAI's built-in tool calls; none are served here (function calls are the client's). Echoed. */
  max_tool_calls: { schema: z.number().int().min(1).nullish(), policy: "ignored" },
  /** `disabled` (and `auto`, documented): a context longer than the model's is a 400, never cut. */
  truncation: { schema: z.enum(["auto", "disabled"]).nullish(), policy: "ignored" },
  /** `message.output_text.logprobs` is honoured (models with logprobs); the other values name content this service never produces. */
  include: {
    schema: z.array(z.enum(INCLUDABLE)).max(16).nullish(),
    policy: "honoured",
    capability: "logprobs",
    uses: (body) => (body.include ?? []).includes(LOGPROBS_INCLUDE),
  },
  /** One tier is served: "auto" and "default" name it; a tier with other latency or price is refused. */
  service_tier: { schema: z.enum(["auto", "default"], "only 'auto' and 'default' are served").nullish(), policy: "ignored" },
  /** Logprobs of the output text are asked for by `include` (a 400 for a model without them names `include`). */
  top_logprobs: {
    schema: z.number().int().min(0).max(20).nullish(),
    policy: "honoured",
    capability: "logprobs",
    uses: (body) => (body.top_logprobs ?? 0) > 0,
    param: "include",
    unsupported: () => "include",
  },
} as const satisfies ParameterTable<ResponseParameterBody>;
