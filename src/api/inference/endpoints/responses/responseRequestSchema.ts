import { z } from "zod";
import { exceedsNestingDepth } from "../shared/jsonSchemas/jsonNestingDepth.ts";
import { MAX_SCHEMA_DEPTH } from "../shared/jsonSchemas/jsonSchemaProblem.ts";
import { exceedsJsonValues } from "../shared/jsonSchemas/jsonValueCount.ts";
import { MAX_REQUEST_SCHEMA_VALUES } from "../chat/chatCompletionRequestSchema.ts";

const FunctionNameSchema = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, "must be 1-64 letters, digits, '_' or '-'");

const JsonObjectSchema = z.record(z.string(), z.unknown()).superRefine((schema, ctx) => {
  if (exceedsNestingDepth(schema, MAX_SCHEMA_DEPTH)) {
    ctx.addIssue({ code: "custom", message: `the schema is nested too deeply (more than ${MAX_SCHEMA_DEPTH} levels).` });
  }
});

/** Text of an input message: `input_text` parts (an assistant message's earlier output: `output_text`). */
const TextPartSchema = z.looseObject({ type: z.enum(["input_text", "output_text"]), text: z.string() });
const ContentSchema = z.union([z.string(), z.array(TextPartSchema)], {
  error: () => 'expected a string or an array of text parts ({"type": "input_text", "text": "..."}); images, files and audio are not served.',
});

const MessageItemSchema = z.looseObject({
  type: z.literal("message").optional(),
  id: z.string().optional(),
  role: z.enum(["user", "system", "developer", "assistant"]),
  content: ContentSchema,
});
const FunctionCallItemSchema = z.looseObject({
  type: z.literal("function_call"),
  id: z.string().optional(),
  call_id: z.string().min(1),
  name: FunctionNameSchema,
  arguments: z.string(),
});
const FunctionCallOutputItemSchema = z.looseObject({
  type: z.literal("function_call_output"),
  id: z.string().optional(),
  call_id: z.string().min(1),
  output: z.union([z.string(), z.array(TextPartSchema)]),
});
/** A reasoning item of an earlier output sent back: accepted, not given to the model again (as OpenAI's stateless mode). */
const ReasoningItemSchema = z.looseObject({ type: z.literal("reasoning"), id: z.string().optional() });

export const InputItemSchema = z.union([MessageItemSchema, FunctionCallItemSchema, FunctionCallOutputItemSchema, ReasoningItemSchema], {
  error: () => "expected a message, function_call, function_call_output or reasoning item (other item types are not served).",
});
export type InputItem = z.infer<typeof InputItemSchema>;

export const ResponseToolSchema = z.strictObject(
  {
    type: z.literal("function", "only function tools are served"),
    name: FunctionNameSchema,
    description: z.string().nullish(),
    parameters: JsonObjectSchema.nullish(),
    strict: z.boolean().nullish(),
  },
  { error: () => "only function tools ({type: 'function', name, parameters}) are served." },
);
export type ResponseTool = z.infer<typeof ResponseToolSchema>;

export const ResponseToolChoiceSchema = z.union([
  z.enum(["none", "auto", "required"]),
  z.strictObject({ type: z.literal("function"), name: FunctionNameSchema }),
]);

export const TextFormatSchema = z.discriminatedUnion("type", [
  z.strictObject({ type: z.literal("text") }),
  z.strictObject({ type: z.literal("json_object") }),
  z.strictObject({
    type: z.literal("json_schema"),
    name: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, "must be 1-64 letters, digits, '_' or '-'"),
    description: z.string().nullish(),
    schema: JsonObjectSchema,
    strict: z.boolean().nullish(),
  }),
]);

/** `include` values: the output text's logprobs are honoured; the others name content this service never produces. */
const INCLUDABLE = [
  "message.output_text.logprobs",
  "reasoning.encrypted_content",
  "message.input_image.image_url",
  "computer_call_output.output.image_url",
  "file_search_call.results",
  "web_search_call.action.sources",
  "web_search_call.results",
  "code_interpreter_call.outputs",
] as const;
export const LOGPROBS_INCLUDE = "message.output_text.logprobs";

/**
 * POST /v1/responses (OpenAI's Responses API). Fields beyond these are backend-specific parameters, as
 * for chat completions (allowed per model by its registry entry; an unknown one is a 400).
 */
export const ResponseRequestSchema = z
  .object({
    model: z.string().min(1),
    input: z.union([z.string(), z.array(InputItemSchema).min(1)]),
    instructions: z.string().nullish(),
    max_output_tokens: z.number().int().min(1).nullish(),
    temperature: z.number().min(0).max(2).nullish(),
    top_p: z.number().min(0).max(1).nullish(),
    tools: z.array(ResponseToolSchema).max(128).nullish(),
    tool_choice: ResponseToolChoiceSchema.nullish(),
    parallel_tool_calls: z.boolean().nullish(),
    text: z.looseObject({ format: TextFormatSchema.nullish(), verbosity: z.enum(["low", "medium", "high"]).nullish() }).nullish(),
    reasoning: z.looseObject({ effort: z.string().min(1).max(32).nullish(), summary: z.string().nullish(), generate_summary: z.string().nullish() }).nullish(),
    previous_response_id: z.string().min(1).max(200).nullish(),
    store: z.boolean().nullish(),
    background: z.boolean().nullish(),
    stream: z.boolean().nullish(),
    stream_options: z.looseObject({ include_obfuscation: z.boolean().nullish() }).nullish(),
    metadata: z
      .record(z.string().max(64), z.string().max(512))
      .refine((pairs) => Object.keys(pairs).length <= 16, "at most 16 key-value pairs")
      .nullish(),
    user: z.string().max(256).nullish(),
    safety_identifier: z.string().max(256).nullish(),
    prompt_cache_key: z.string().max(256).nullish(),
    /** `disabled` (and `auto`, documented) : a context longer than the model's is a 400, never cut. */
    truncation: z.enum(["auto", "disabled"]).nullish(),
    include: z.array(z.enum(INCLUDABLE)).max(16).nullish(),
    service_tier: z.enum(["auto", "default"], "only 'auto' and 'default' are served").nullish(),
    top_logprobs: z.number().int().min(0).max(20).nullish(),
  })
  .catchall(z.unknown())
  .superRefine((body, ctx) => {
    if (body.store === false && body.background === true) {
      ctx.addIssue({
        code: "custom",
        path: ["background"],
        message: "background responses must be stored: store: false cannot be used with background: true.",
      });
    }
    const toolNames = new Set((body.tools ?? []).map((t) => t.name));
    if (body.tool_choice && body.tool_choice !== "none" && body.tool_choice !== "auto" && toolNames.size === 0) {
      ctx.addIssue({ code: "custom", path: ["tool_choice"], message: "tool_choice is only allowed when tools are specified." });
    }
    if (typeof body.tool_choice === "object" && body.tool_choice && !toolNames.has(body.tool_choice.name)) {
      ctx.addIssue({ code: "custom", path: ["tool_choice"], message: `tool_choice names '${body.tool_choice.name}', which is not in tools.` });
    }
    const format = body.text?.format;
    const schemas = [...(body.tools ?? []).map((tool) => tool.parameters), format?.type === "json_schema" ? format.schema : undefined];
    if (
      exceedsJsonValues(
        schemas.filter((schema) => schema !== undefined && schema !== null),
        MAX_REQUEST_SCHEMA_VALUES,
      )
    ) {
      ctx.addIssue({
        code: "custom",
        path: [body.tools?.length ? "tools" : "text"],
        message: `the JSON Schemas of a request may hold at most ${MAX_REQUEST_SCHEMA_VALUES} values in all.`,
      });
    }
  });

export type ResponseRequest = z.infer<typeof ResponseRequestSchema>;

/** The OpenAI fields of a Responses request; any other field is a backend-specific parameter. */
export const RESPONSE_REQUEST_FIELDS: ReadonlySet<string> = new Set(Object.keys(ResponseRequestSchema.shape));

/** The query of GET /v1/responses/{id}. */
export const RetrieveResponseQuerySchema = z.object({
  stream: z
    .enum(["true", "false"])
    .transform((value) => value === "true")
    .optional(),
  starting_after: z.coerce.number().int().min(-1).optional(),
  include: z.union([z.string(), z.array(z.string())]).optional(),
  include_obfuscation: z.string().optional(),
});
export type RetrieveResponseQuery = z.infer<typeof RetrieveResponseQuerySchema>;

/** The query of GET /v1/responses/{id}/input_items. */
export const InputItemsQuerySchema = z.object({
  after: z.string().max(200).optional(),
  before: z.string().max(200).optional(),
  limit: z.coerce.number().int().min(1).max(100).optional(),
  order: z.enum(["asc", "desc"]).optional(),
  include: z.union([z.string(), z.array(z.string())]).optional(),
});
export type InputItemsQuery = z.infer<typeof InputItemsQuerySchema>;
