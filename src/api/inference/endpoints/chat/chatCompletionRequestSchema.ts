import { z } from "zod";
import { samplingFields } from "../shared/samplingSchemas.ts";
import { exceedsNestingDepth } from "../shared/jsonSchemas/jsonNestingDepth.ts";
import { exceedsJsonValues } from "../shared/jsonSchemas/jsonValueCount.ts";
import { MAX_SCHEMA_DEPTH } from "../shared/jsonSchemas/jsonSchemaProblem.ts";

const TextPartSchema = z.strictObject({ type: z.literal("text"), text: z.string() });
/** What a content part of another type asks for, named in the 400 (no served model takes them). */
const PART_CAPABILITIES: Record<string, string> = {
  image_url: "images",
  input_image: "images",
  input_audio: "audio",
  audio: "audio",
  file: "files",
  input_file: "files",
};

/** Why content is refused: a part type no model here takes names the capability; else what is expected. */
function contentError(input: unknown): string {
  if (Array.isArray(input)) {
    for (const part of input) {
      const type = typeof part === "object" && part !== null ? (part as { type?: unknown }).type : undefined;
      if (typeof type === "string" && type in PART_CAPABILITIES) {
        return `this model does not take ${PART_CAPABILITIES[type]} (a '${type}' content part); content must be a string or an array of text parts.`;
      }
    }
  }
  return 'expected a string or an array of text parts ({"type": "text", "text": "..."}).';
}

/** Message content: a string or text parts (other part types, e.g. images, are not served). */
const ContentSchema = z.union([z.string(), z.array(TextPartSchema)], { error: (issue) => contentError(issue.input) });

const FunctionNameSchema = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, "must be 1-64 letters, digits, '_' or '-'");

const ToolCallSchema = z.strictObject({
  id: z.string().min(1),
  type: z.literal("function"),
  function: z.strictObject({ name: FunctionNameSchema, arguments: z.string() }),
});

export const ChatMessageSchema = z.discriminatedUnion("role", [
  z.strictObject({ role: z.literal("system"), content: ContentSchema, name: z.string().optional() }),
  z.strictObject({ role: z.literal("developer"), content: ContentSchema, name: z.string().optional() }),
  z.strictObject({ role: z.literal("user"), content: ContentSchema, name: z.string().optional() }),
  z.strictObject({
    role: z.literal("assistant"),
    content: ContentSchema.nullish(),
    name: z.string().optional(),
    tool_calls: z.array(ToolCallSchema).optional(),
    reasoning_content: z.string().nullish(),
    refusal: z.string().nullish(),
  }),
  z.strictObject({ role: z.literal("tool"), content: ContentSchema, tool_call_id: z.string().min(1) }),
]);

/**
 * A JSON Schema a client sends (tool parameters, a response format): an object, nested at most
 * MAX_SCHEMA_DEPTH levels (checked without recursion, before anything walks it). Whether it is a valid,
 * satisfiable schema is checked by checkRequestSchemas with a real validator.
 */
const JsonObjectSchema = z.record(z.string(), z.unknown()).superRefine((schema, ctx) => {
  if (exceedsNestingDepth(schema, MAX_SCHEMA_DEPTH)) {
    ctx.addIssue({ code: "custom", message: `the schema is nested too deeply (more than ${MAX_SCHEMA_DEPTH} levels).` });
  }
});

/**
 * The JSON values (objects, arrays, scalars) all the JSON Schemas of one request (tools' parameters,
 * the response format) may hold together: several times OpenAI's 5000 properties per schema, and a
 * bound on what checking them costs the API's event loop (tens of milliseconds at most).
 */
export const MAX_REQUEST_SCHEMA_VALUES = 50_000;

export const ToolSchema = z.strictObject({
  type: z.literal("function"),
  function: z.strictObject({
    name: FunctionNameSchema,
    description: z.string().optional(),
    parameters: JsonObjectSchema.optional(),
    strict: z.boolean().nullish(),
  }),
});

export const ToolChoiceSchema = z.union([
  z.enum(["none", "auto", "required"]),
  z.strictObject({ type: z.literal("function"), function: z.strictObject({ name: FunctionNameSchema }) }),
]);

export const ResponseFormatSchema = z.discriminatedUnion("type", [
  z.strictObject({ type: z.literal("text") }),
  z.strictObject({ type: z.literal("json_object") }),
  z.strictObject({
    type: z.literal("json_schema"),
    json_schema: z.strictObject({
      name: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, "must be 1-64 letters, digits, '_' or '-'"),
      description: z.string().optional(),
      schema: JsonObjectSchema.optional(),
      strict: z.boolean().nullish(),
    }),
  }),
]);

/**
 * OpenAI request fields that are accepted and deliberately not used (docs/compatibility.md): what they
 * ask for changes nothing a client gets back from this service.
 */
const acceptedAndIgnored = {
  /** Tags for OpenAI's dashboard: 16 string pairs at most (keys up to 64 characters, values up to 512). */
  metadata: z
    .record(z.string().max(64), z.string().max(512))
    .refine((pairs) => Object.keys(pairs).length <= 16, "at most 16 key-value pairs")
    .nullish(),
  /** Every completion is kept for the retention period either way (resumable, readable by its owner); nothing longer. */
  store: z.boolean().nullish(),
  /** One tier is served: "auto" and "default" name it; a tier with other latency or price is refused. */
  service_tier: z.enum(["auto", "default"], "only 'auto' and 'default' are served").nullish(),
  /** Predicted Outputs only speed a generation up, never change it; no prediction tokens are charged. */
  prediction: z.strictObject({ type: z.literal("content"), content: z.union([z.string(), z.array(TextPartSchema)]) }).nullish(),
};

/**
 * POST /v1/chat/completions (spec 4.1). Fields beyond these are backend-specific parameters, allowed per
 * model by its registry entry (backendParameters: an unknown one is a 400, never dropped).
 */
export const ChatCompletionRequestSchema = z
  .object({
    ...samplingFields,
    ...acceptedAndIgnored,
    messages: z.array(ChatMessageSchema).min(1),
    tools: z.array(ToolSchema).max(128).nullish(),
    tool_choice: ToolChoiceSchema.nullish(),
    parallel_tool_calls: z.boolean().nullish(),
    /** Checked against the model's allowed values (toEngineChatRequest). */
    reasoning_effort: z.string().min(1).max(32).nullish(),
    max_completion_tokens: z.number().int().min(1).nullish(),
    response_format: ResponseFormatSchema.nullish(),
    logprobs: z.boolean().nullish(),
    top_logprobs: z.number().int().min(0).max(20).nullish(),
  })
  .catchall(z.unknown())
  .superRefine((body, ctx) => {
    if (body.top_logprobs !== null && body.top_logprobs !== undefined && body.logprobs !== true) {
      ctx.addIssue({ code: "custom", path: ["top_logprobs"], message: "top_logprobs requires logprobs to be true." });
    }
    if (body.stream_options && body.stream !== true) {
      ctx.addIssue({ code: "custom", path: ["stream_options"], message: "stream_options is only allowed when stream is true." });
    }
    const toolNames = new Set((body.tools ?? []).map((t) => t.function.name));
    if (body.tool_choice && body.tool_choice !== "none" && toolNames.size === 0) {
      ctx.addIssue({ code: "custom", path: ["tool_choice"], message: "tool_choice is only allowed when tools are specified." });
    }
    if (typeof body.tool_choice === "object" && body.tool_choice && toolNames.size && !toolNames.has(body.tool_choice.function.name)) {
      ctx.addIssue({ code: "custom", path: ["tool_choice"], message: `tool_choice names '${body.tool_choice.function.name}', which is not in tools.` });
    }
    if (body.parallel_tool_calls !== null && body.parallel_tool_calls !== undefined && toolNames.size === 0) {
      ctx.addIssue({ code: "custom", path: ["parallel_tool_calls"], message: "parallel_tool_calls is only allowed when tools are specified." });
    }
    const schemas = [
      ...(body.tools ?? []).map((tool) => tool.function.parameters),
      body.response_format?.type === "json_schema" ? body.response_format.json_schema.schema : undefined,
    ];
    if (
      exceedsJsonValues(
        schemas.filter((schema) => schema !== undefined && schema !== null),
        MAX_REQUEST_SCHEMA_VALUES,
      )
    ) {
      ctx.addIssue({
        code: "custom",
        path: [body.tools?.length ? "tools" : "response_format"],
        message: `the JSON Schemas of a request may hold at most ${MAX_REQUEST_SCHEMA_VALUES} values in all.`,
      });
    }
    body.messages.forEach((message, index) => {
      if (message.role === "assistant" && (message.content === null || message.content === undefined) && !message.tool_calls?.length) {
        ctx.addIssue({ code: "custom", path: ["messages", index, "content"], message: "an assistant message needs content or tool_calls." });
      }
    });
  });

export type ChatCompletionRequest = z.infer<typeof ChatCompletionRequestSchema>;
export type ChatMessageInput = z.infer<typeof ChatMessageSchema>;

/** The OpenAI fields of a chat request; any other field is a backend-specific parameter. */
export const CHAT_REQUEST_FIELDS: ReadonlySet<string> = new Set(Object.keys(ChatCompletionRequestSchema.shape));
