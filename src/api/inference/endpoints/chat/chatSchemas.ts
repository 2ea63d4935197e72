import { z } from "zod";
import { itemsInOrder } from "../shared/itemsInOrder.ts";
import { exceedsNestingDepth } from "../shared/jsonSchemas/jsonNestingDepth.ts";
import { MAX_SCHEMA_DEPTH } from "../shared/jsonSchemas/jsonSchemaProblem.ts";

export const TextPartSchema = z.strictObject({ type: z.literal("text"), text: z.string() });
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
  // OpenAI's words for an empty array of parts.
  if (Array.isArray(input) && input.length === 0) return "empty array. Expected an array with minimum length 1, but got an empty array instead.";
  if (Array.isArray(input)) {
    for (const part of input) {
      const type = typeof part === "object" && part !== null ? (part as { type?: unknown }).type : undefined;
      if (typeof type === "string" && Object.hasOwn(PART_CAPABILITIES, type)) {
        return `this model does not take ${PART_CAPABILITIES[type]} (a '${type}' content part); content must be a string or an array of text parts.`;
      }
    }
  }
  return 'expected a string or an array of text parts ({"type": "text", "text": "..."}).';
}

/** Message content: a string or at least one text part (other part types, e.g. images, are not served). */
const ContentSchema = z.union([z.string(), itemsInOrder(TextPartSchema, z.array(z.unknown()).min(1))], { error: (issue) => contentError(issue.input) });

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
    tool_calls: itemsInOrder(ToolCallSchema).optional(),
    reasoning_content: z.string().nullish(),
    refusal: z.string().nullish(),
  }),
  // `name` (the tool's): LangChain.js sends it on every tool result; not given to the model.
  z.strictObject({ role: z.literal("tool"), content: ContentSchema, tool_call_id: z.string().min(1), name: z.string().nullish() }),
]);

/**
 * A JSON Schema a client sends (tool parameters, a response format): an object, nested at most
 * MAX_SCHEMA_DEPTH levels (checked without recursion, before anything walks it). Whether it is a valid,
 * satisfiable schema is checked by checkRequestSchemas with a real validator.
 */
export const JsonObjectSchema = z.record(z.string(), z.unknown()).superRefine((schema, ctx) => {
  if (exceedsNestingDepth(schema, MAX_SCHEMA_DEPTH)) {
    ctx.addIssue({ code: "custom", message: `the schema is nested too deeply (more than ${MAX_SCHEMA_DEPTH} levels).` });
  }
});

export const ToolSchema = z.strictObject({
  type: z.literal("function", 'only function tools are served ({"type": "function", "function": {...}}); custom tools are not'),
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
