import { z } from "zod";

const TopLogprobSchema = z.object({ token: z.string(), logprob: z.number(), bytes: z.array(z.number()) });
const TokenLogprobSchema = TopLogprobSchema.extend({ top_logprobs: z.array(TopLogprobSchema) });

export const ToolCallDeltaSchema = z.object({
  index: z.number().int(),
  id: z.string().optional(),
  type: z.literal("function").optional(),
  function: z.object({ name: z.string().optional(), arguments: z.string().optional() }).optional(),
});

export const EngineDeltaSchema = z.object({
  content: z.string().optional(),
  reasoning: z.string().optional(),
  toolCalls: z.array(ToolCallDeltaSchema).optional(),
  logprobs: z.array(TokenLogprobSchema).optional(),
});

export const UsageSchema = z.object({
  promptTokens: z.number().int().nonnegative(),
  completionTokens: z.number().int().nonnegative(),
  reasoningTokens: z.number().int().nonnegative(),
});

export const JobErrorSchema = z.object({
  /** `cancelled`: stopped by its owner, abandoned, or its request ended early (see CancelReason); what it charged is in the error message's usage. */
  kind: z.enum(["invalid_request", "unavailable", "internal", "cancelled"]),
  message: z.string(),
  param: z.string().nullable(),
  /**
   * OpenAI's code for an invalid request, where the engine gave one (absent: `invalid_value`); `abandoned`
   * on a cancelled job the platform stopped (nobody listened, or it was silent), not its owner; `lost` on
   * one whose request the API ended early (its client told so: a shutdown's 503, Redis lost).
   */
  code: z.string().max(64).nullish(),
});

/**
 * What a worker writes for one completion, in order, each with a sequence number (0, 1, 2, ...):
 * `started` first, then `delta`s (or one `embeddings`), then `finish`, and last `usage` (once the usage is
 * recorded, or, PostgreSQL unreachable, after the worker's wait for it, the recording going on); or `error`
 * as the last message instead. `usage` and `error` are terminal.
 */
export const DeltaMessageSchema = z.discriminatedUnion("type", [
  z.object({ seq: z.number().int(), type: z.literal("started") }),
  z.object({
    seq: z.number().int(),
    type: z.literal("delta"),
    delta: EngineDeltaSchema,
    /**
     * Completion tokens (reasoning included) the engine generated for this delta: every token since the
     * previous delta message, up to and including this one's. Summed over a replay stream, it is what was
     * delivered, so a worker continuing the completion after a crash charges exactly that. Absent when
     * the engine could not count it (and in messages written before it existed): then the delta's text
     * is counted with the engine's tokenizer.
     */
    tokens: z.number().int().nonnegative().optional(),
  }),
  z.object({ seq: z.number().int(), type: z.literal("embeddings"), embeddings: z.array(z.array(z.number())) }),
  z.object({
    seq: z.number().int(),
    type: z.literal("finish"),
    finishReason: z.enum(["stop", "length", "tool_calls"]),
    /**
     * The engine's count of the whole request (prompt and reply), which the worker then records: a worker
     * that takes the job over after the finish, its usage not recorded yet, charges exactly this. Absent in
     * messages written before it existed: then the delivered text is counted (see deliveredTokens).
     */
    usage: UsageSchema.optional(),
  }),
  z.object({ seq: z.number().int(), type: z.literal("usage"), usage: UsageSchema }),
  /** `usage`: what was charged, on a cancelled job's error (a stream with include_usage still gets its usage chunk). */
  z.object({ seq: z.number().int(), type: z.literal("error"), error: JobErrorSchema, usage: UsageSchema.optional() }),
]);

export type DeltaMessage = z.infer<typeof DeltaMessageSchema>;
export type EngineDeltaMessage = z.infer<typeof EngineDeltaSchema>;
export type JobError = z.infer<typeof JobErrorSchema>;
export type Usage = z.infer<typeof UsageSchema>;

/** Distributes Omit over the union, so a message can be built without its sequence number. */
export type UnsequencedDeltaMessage = DeltaMessage extends infer M ? (M extends DeltaMessage ? Omit<M, "seq"> : never) : never;

export function isTerminal(message: DeltaMessage): boolean {
  return message.type === "usage" || message.type === "error";
}
