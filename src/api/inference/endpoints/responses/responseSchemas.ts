import { z } from "zod";
import { itemsInOrder } from "../shared/itemsInOrder.ts";
import { exceedsNestingDepth } from "../shared/jsonSchemas/jsonNestingDepth.ts";
import { MAX_SCHEMA_DEPTH } from "../shared/jsonSchemas/jsonSchemaProblem.ts";

/** The parts of a Responses request (RESPONSE_PARAMETERS): input items, function tools, text formats and `include` values. */

const FunctionNameSchema = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, "must be 1-64 letters, digits, '_' or '-'");

const JsonObjectSchema = z.record(z.string(), z.unknown()).superRefine((schema, ctx) => {
  if (exceedsNestingDepth(schema, MAX_SCHEMA_DEPTH)) {
    ctx.addIssue({ code: "custom", message: `the schema is nested too deeply (more than ${MAX_SCHEMA_DEPTH} levels).` });
  }
});

/** Text of an input message: `input_text` parts (an assistant message's earlier output: `output_text`). */
const TextPartSchema = z.looseObject({ type: z.enum(["input_text", "output_text"]), text: z.string() });
/** An assistant message's earlier refusal sent back (OpenAI's output part): its text, as output text. */
const RefusalPartSchema = z
  .looseObject({ type: z.literal("refusal"), refusal: z.string() })
  .transform(({ refusal }) => ({ type: "output_text" as const, text: refusal }));
const ContentSchema = z.union([z.string(), itemsInOrder(z.union([TextPartSchema, RefusalPartSchema]), z.array(z.unknown()).min(1))], {
  error: () => 'expected a string or an array of text parts ({"type": "input_text", "text": "..."}); images, files and audio are not served.',
});

const ROLES = ["user", "system", "developer", "assistant"] as const;
const MESSAGE_ROLES: ReadonlySet<string> = new Set(ROLES);

const MessageItemSchema = z.looseObject({
  type: z.literal("message").optional(),
  id: z.string().optional(),
  role: z.enum(ROLES),
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
  output: z.union([z.string(), itemsInOrder(TextPartSchema)]),
});
/** A reasoning item of an earlier output sent back: accepted, not given to the model again (as OpenAI's stateless mode). */
const ReasoningItemSchema = z.looseObject({ type: z.literal("reasoning"), id: z.string().optional() });

/**
 * An item of one of the caller's stored responses, by its id (what the Vercel AI SDK sends for output it
 * was given). `type` may be left out, as OpenAI's SDKs allow: then the item has nothing but its id.
 */
const ItemReferenceSchema = z.union([
  z.looseObject({ type: z.literal("item_reference"), id: z.string().min(1).max(200) }),
  z.strictObject({ type: z.null().optional(), id: z.string().min(1).max(200) }).transform(({ id }) => ({ type: "item_reference" as const, id })),
]);

const CONTENT_NOT_SERVED = 'a message\'s content is a string or text parts ({"type": "input_text", "text": "..."}); images, files and audio are not served.';

export const InputItemSchema = z.union([MessageItemSchema, FunctionCallItemSchema, FunctionCallOutputItemSchema, ReasoningItemSchema, ItemReferenceSchema], {
  // A message whose content has a part this service does not serve (input_image, input_file,
  // input_audio) says so, not that the item is of no known type.
  error: (issue) =>
    isMessageLike(issue.input)
      ? emptyContent(issue.input)
        ? EMPTY_CONTENT
        : CONTENT_NOT_SERVED
      : "expected a message, function_call, function_call_output, reasoning or item_reference item (other item types are not served).",
});

/** OpenAI's words for a message whose content is an empty array of parts. */
const EMPTY_CONTENT = "a message's content is an empty array. Expected an array with minimum length 1, but got an empty array instead.";

function emptyContent(input: unknown): boolean {
  const content = (input as { content?: unknown }).content;
  return Array.isArray(content) && content.length === 0;
}

function isMessageLike(input: unknown): boolean {
  if (input === null || typeof input !== "object") return false;
  const item = input as { type?: unknown; role?: unknown };
  return (item.type === undefined || item.type === "message") && MESSAGE_ROLES.has(item.role as string);
}
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
export const INCLUDABLE = [
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
