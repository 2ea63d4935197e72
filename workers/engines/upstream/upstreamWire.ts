import { z } from "zod";

/**
 * What OpenAI-compatible servers send back, parsed leniently: every object is loose (servers add fields:
 * vLLM's `stop_reason`, llama.cpp's `timings`, ...), most fields may be missing or null.
 */

const TopLogprobSchema = z.looseObject({
  token: z.string(),
  logprob: z.number(),
  bytes: z.array(z.number().int()).nullish(),
});

export const TokenLogprobSchema = TopLogprobSchema.extend({
  top_logprobs: z.array(TopLogprobSchema).nullish(),
});

export const ToolCallDeltaSchema = z.looseObject({
  index: z.number().int().nonnegative().nullish(),
  id: z.string().nullish(),
  type: z.string().nullish(),
  function: z.looseObject({ name: z.string().nullish(), arguments: z.string().nullish() }).nullish(),
});

export const ChunkChoiceSchema = z.looseObject({
  index: z.number().int().nullish(),
  delta: z
    .looseObject({
      content: z.string().nullish(),
      /** vLLM / SGLang / DeepSeek. */
      reasoning_content: z.string().nullish(),
      /** Ollama, OpenRouter and newer vLLM. */
      reasoning: z.string().nullish(),
      tool_calls: z.array(ToolCallDeltaSchema).nullish(),
    })
    .nullish(),
  finish_reason: z.string().nullish(),
  logprobs: z.looseObject({ content: z.array(TokenLogprobSchema).nullish() }).nullish(),
});

export const UsageSchema = z.looseObject({
  prompt_tokens: z.number().int().nonnegative(),
  completion_tokens: z.number().int().nonnegative(),
  completion_tokens_details: z.looseObject({ reasoning_tokens: z.number().int().nonnegative().nullish() }).nullish(),
});
export type Usage = z.infer<typeof UsageSchema>;

export const ChatChunkSchema = z.looseObject({
  object: z.string().nullish(),
  choices: z.array(ChunkChoiceSchema).nullish(),
  /** A usage that is not valid counts (negative, fractional) is taken as none: the reply is not failed for it, the usage is estimated. */
  usage: UsageSchema.nullish().catch(null),
  /** Some servers report a failure inside the stream as `{"error": ...}` (or vLLM's `{"object": "error", ...}`). */
  error: z.unknown().optional(),
  message: z.string().nullish(),
});
export type ChatChunk = z.infer<typeof ChatChunkSchema>;

export const EmbeddingResponseSchema = z.looseObject({
  data: z.array(
    z.looseObject({
      index: z.number().int().nonnegative().nullish(),
      /** A float array, or base64 of little-endian float32 when a server defaults to that. */
      embedding: z.union([z.array(z.number()), z.string()]),
    }),
  ),
  usage: z.looseObject({ prompt_tokens: z.number().int().nonnegative().nullish() }).nullish().catch(null),
});

const ErrorObjectSchema = z.looseObject({
  message: z.string().nullish(),
  type: z.string().nullish(),
  param: z.string().nullish(),
  code: z.union([z.string(), z.number()]).nullish(),
});

/**
 * Error bodies: OpenAI / vLLM / llama.cpp `{"error": {message, type, param, code}}`, TGI `{"error": "..."}`,
 * old vLLM `{"object": "error", "message": ...}`, FastAPI validation `{"detail": [{loc, msg}]}` or `{"detail": "..."}`.
 */
export const ErrorBodySchema = z.looseObject({
  error: z.union([z.string(), ErrorObjectSchema]).nullish(),
  message: z.string().nullish(),
  param: z.string().nullish(),
  detail: z.union([z.string(), z.array(z.looseObject({ loc: z.array(z.union([z.string(), z.number()])).nullish(), msg: z.string().nullish() }))]).nullish(),
});
