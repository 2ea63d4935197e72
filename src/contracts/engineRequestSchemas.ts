import { z } from "zod";

/** zod mirrors of the engine request types (workers/engines/engine.ts), to parse job data at the worker's boundary. */
const JsonObjectSchema = z.record(z.string(), z.unknown());

export const ToolCallSchema = z.object({
  id: z.string(),
  type: z.literal("function"),
  function: z.object({ name: z.string(), arguments: z.string() }),
});

export const EngineChatMessageSchema = z.object({
  role: z.enum(["system", "user", "assistant", "tool"]),
  content: z.string().nullable(),
  name: z.string().optional(),
  tool_calls: z.array(ToolCallSchema).optional(),
  tool_call_id: z.string().optional(),
});

export const ToolDefinitionSchema = z.object({
  type: z.literal("function"),
  function: z.object({
    name: z.string(),
    description: z.string().optional(),
    parameters: JsonObjectSchema.optional(),
    strict: z.boolean().optional(),
  }),
});

export const ToolChoiceSchema = z.union([
  z.enum(["none", "auto", "required"]),
  z.object({ type: z.literal("function"), function: z.object({ name: z.string() }) }),
]);

export const ResponseFormatSchema = z.discriminatedUnion("type", [
  z.object({ type: z.literal("text") }),
  z.object({ type: z.literal("json_object") }),
  z.object({
    type: z.literal("json_schema"),
    json_schema: z.object({
      name: z.string(),
      description: z.string().optional(),
      schema: JsonObjectSchema.optional(),
      strict: z.boolean().optional(),
    }),
  }),
]);

export const SamplingParamsSchema = z.object({
  maxTokens: z.number().int().positive(),
  temperature: z.number(),
  topP: z.number(),
  seed: z.number().int().optional(),
  stop: z.array(z.string()).optional(),
  presencePenalty: z.number(),
  frequencyPenalty: z.number(),
  logprobs: z.boolean().optional(),
  topLogprobs: z.number().int().optional(),
});

export const EngineChatRequestSchema = SamplingParamsSchema.extend({
  messages: z.array(EngineChatMessageSchema),
  tools: z.array(ToolDefinitionSchema).optional(),
  toolChoice: ToolChoiceSchema.optional(),
  parallelToolCalls: z.boolean().optional(),
  responseFormat: ResponseFormatSchema.optional(),
  reasoningEffort: z.enum(["low", "medium", "high"]).optional(),
  extra: JsonObjectSchema.optional(),
});

export type EngineChatRequest = z.infer<typeof EngineChatRequestSchema>;
