import { z } from "zod";
import { itemsInOrder } from "../shared/itemsInOrder.ts";
import type { ParameterTable } from "../shared/requestParameters.ts";
import { SAMPLING_PARAMETERS, tokenBoundSchema } from "../shared/samplingSchemas.ts";
import { ChatMessageSchema, ResponseFormatSchema, TextPartSchema, ToolChoiceSchema, ToolSchema } from "./chatSchemas.ts";
import { MetadataSchema } from "../shared/metadataSchema.ts";

/** The reasoning_effort values of a reasoning model whose registry entry names none. */
export const DEFAULT_REASONING_EFFORTS: readonly string[] = ["low", "medium", "high"];

/** What the capability checks read of a chat request. */
type ChatParameterBody = {
  tools?: unknown[] | null;
  tool_choice?: unknown;
  parallel_tool_calls?: boolean | null;
  response_format?: { type: string } | null;
  logprobs?: boolean | null;
  top_logprobs?: number | null;
  reasoning_effort?: string | null;
};

const set = (value: unknown) => value !== null && value !== undefined;

/**
 * Every parameter of POST /v1/chat/completions (spec 4.1), in the order of its schema: the request schema
 * (chatCompletionRequestSchema.ts), the capability checks (toEngineChatRequest) and the models API's
 * `supported_parameters` derive from it. Fields beyond these are backend-specific parameters, allowed per
 * model by its registry entry (backendParameters: an unknown one is a 400, never dropped).
 */
export const CHAT_PARAMETERS = {
  ...SAMPLING_PARAMETERS,
  /** Tags for OpenAI's dashboard: 16 string pairs at most (keys up to 64 characters, values up to 512). */
  metadata: {
    schema: MetadataSchema,
    policy: "ignored",
  },
  /** Every completion is kept for the retention period either way (resumable, readable by its owner); nothing longer. */
  store: { schema: z.boolean().nullish(), policy: "ignored" },
  /** OpenAI's prompt-cache routing hint and retention: no prompt cache outlives a request here. */
  prompt_cache_key: { schema: z.string().max(256).nullish(), policy: "ignored" },
  prompt_cache_retention: { schema: z.enum(["in-memory", "24h"]).nullish(), policy: "ignored" },
  /** An end user's stable id, for OpenAI's abuse monitoring. */
  safety_identifier: { schema: z.string().max(256).nullish(), policy: "ignored" },
  /** How long an answer should be (OpenAI's GPT-5 models); the models here are not told. */
  verbosity: { schema: z.enum(["low", "medium", "high"]).nullish(), policy: "ignored" },
  /** One tier is served: "auto" and "default" name it; a tier with other latency or price is refused. */
  service_tier: { schema: z.enum(["auto", "default"], "only 'auto' and 'default' are served").nullish(), policy: "ignored" },
  /** Predicted Outputs only speed a generation up, never change it; no prediction tokens are charged. */
  prediction: {
    schema: z.strictObject({ type: z.literal("content"), content: z.union([z.string(), itemsInOrder(TextPartSchema)]) }).nullish(),
    policy: "ignored",
  },
  messages: { schema: itemsInOrder(ChatMessageSchema, z.array(z.unknown()).min(1)), policy: "honoured", listed: false },
  tools: { schema: z.array(ToolSchema).max(128).nullish(), policy: "honoured", capability: "tools", uses: (body) => (body.tools?.length ?? 0) > 0 },
  tool_choice: {
    schema: ToolChoiceSchema.nullish(),
    policy: "honoured",
    capability: "tools",
    uses: (body) => Boolean(body.tool_choice) && body.tool_choice !== "none",
  },
  parallel_tool_calls: { schema: z.boolean().nullish(), policy: "honoured", capability: "tools", uses: (body) => set(body.parallel_tool_calls) },
  response_format: {
    schema: ResponseFormatSchema.nullish(),
    policy: "honoured",
    capability: "json_schema",
    uses: (body) => Boolean(body.response_format) && body.response_format?.type !== "text",
    unsupported: (body) => `response_format ${body.response_format?.type}`,
  },
  logprobs: { schema: z.boolean().nullish(), policy: "honoured", capability: "logprobs", uses: (body) => body.logprobs === true },
  top_logprobs: { schema: z.number().int().min(0).max(20).nullish(), policy: "honoured", capability: "logprobs", uses: (body) => set(body.top_logprobs) },
  /** Checked against the model's allowed values (toEngineChatRequest). */
  reasoning_effort: {
    schema: z.string().min(1).max(32).nullish(),
    policy: "honoured",
    capability: "reasoning",
    uses: (body) => Boolean(body.reasoning_effort),
    unsupported: () => "reasoning_effort (it is not a reasoning model)",
  },
  max_completion_tokens: { schema: tokenBoundSchema.nullish(), policy: "honoured" },
} as const satisfies ParameterTable<ChatParameterBody>;
