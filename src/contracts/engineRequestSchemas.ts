import { z } from "zod";

/**
 * The requests the API sends to an engine through the queue: the one source of these types. The API
 * builds them, the worker parses job data with them, and the engine interface (workers/engines/engine.ts)
 * uses the inferred types. Names follow the OpenAI wire format where a value is passed through unchanged
 * (tool calls, response_format), and camelCase where the adapter interprets it.
 */
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

/** Stop sequences a request may set (OpenAI's 4). */
export const MAX_STOP_SEQUENCES = 4;
/**
 * Characters (UTF-16 code units) of one stop sequence, at most. OpenAI documents no bound; the embedded
 * engine's stop detector (node-llama-cpp) keeps a map per character of each sequence, so a sequence of a
 * megabyte cost seconds of blocking and hundreds of megabytes per job. A stop sequence is a marker, a few
 * characters to a line: 256 leaves room for any of them.
 */
export const MAX_STOP_SEQUENCE_CHARS = 256;

export const SamplingParamsSchema = z.object({
  /** Upper bound on generated tokens (answer + reasoning), already resolved from max_tokens / max_completion_tokens. */
  maxTokens: z.number().int().positive(),
  /** Sampling parameters are set only when the client (or the model's registry defaults) set them: each engine applies its own default otherwise. */
  temperature: z.number().optional(),
  topP: z.number().optional(),
  seed: z.number().int().optional(),
  /** Stop sequences; never included in the output. Bounded as the API bounds them (a job that is not is refused: invalid job data). */
  stop: z.array(z.string().min(1).max(MAX_STOP_SEQUENCE_CHARS)).max(MAX_STOP_SEQUENCES).optional(),
  presencePenalty: z.number().optional(),
  frequencyPenalty: z.number().optional(),
  logprobs: z.boolean().optional(),
  /** 0..20, only with logprobs. */
  topLogprobs: z.number().int().optional(),
  /** OpenAI's logit_bias: token id (decimal text, the model's vocabulary) -> -100..100 added to its logit. */
  logitBias: z.record(z.string().regex(/^\d{1,9}$/), z.number().min(-100).max(100)).optional(),
  /**
   * The client set no token bound and the model's backend default applies (upstream reasoning models):
   * the adapter sends no max_tokens / max_completion_tokens, and `maxTokens` is only the bound the API
   * held money for (the model's context length).
   */
  maxTokensDefault: z.boolean().optional(),
  /**
   * The client set the bound itself (max_tokens, max_completion_tokens, max_output_tokens): a prompt that
   * leaves less room than that in the model's context is refused, as OpenAI refuses it (400
   * context_length_exceeded), rather than answered shorter than asked. Without it (the API's default
   * bound), the reply stops where the context ends.
   */
  maxTokensGiven: z.boolean().optional(),
});

export const EngineChatRequestSchema = SamplingParamsSchema.extend({
  messages: z.array(EngineChatMessageSchema),
  tools: z.array(ToolDefinitionSchema).optional(),
  toolChoice: ToolChoiceSchema.optional(),
  parallelToolCalls: z.boolean().optional(),
  responseFormat: ResponseFormatSchema.optional(),
  /** One of the values the model's registry entry allows (low, medium, high unless it names others). */
  reasoningEffort: z.string().min(1).max(32).optional(),
  /** Extra backend-specific parameters, passed through untouched by the upstream adapter. */
  extra: JsonObjectSchema.optional(),
});

export type ToolCall = z.infer<typeof ToolCallSchema>;
export type ChatMessage = z.infer<typeof EngineChatMessageSchema>;
export type ChatRole = ChatMessage["role"];
export type JsonSchema = z.infer<typeof JsonObjectSchema>;
export type ToolDefinition = z.infer<typeof ToolDefinitionSchema>;
export type ToolChoice = z.infer<typeof ToolChoiceSchema>;
export type ResponseFormat = z.infer<typeof ResponseFormatSchema>;
export type SamplingParams = z.infer<typeof SamplingParamsSchema>;
export type EngineChatRequest = z.infer<typeof EngineChatRequestSchema>;
export type ReasoningEffort = NonNullable<EngineChatRequest["reasoningEffort"]>;
