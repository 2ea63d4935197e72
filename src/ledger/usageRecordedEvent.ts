import { z } from "zod";

/**
 * The money event. Appended by the worker when a job ends, to the `completion-<id>` stream with
 * expected version "no_stream", so a job that runs twice can never charge twice.
 * Money is integer micro-CHF.
 */
export const UsageRecordedSchema = z.object({
  type: z.literal("UsageRecorded"),
  data: z.object({
    completionId: z.string(),
    accountId: z.string(),
    keyId: z.string(),
    model: z.string(),
    /** The API the request came through (`responses`: POST /v1/responses; events before it carry `chat.completions` for a response). */
    endpoint: z.enum(["chat.completions", "completions", "embeddings", "responses"]),
    promptTokens: z.number().int().nonnegative(),
    /** All generated tokens, reasoning included. */
    completionTokens: z.number().int().nonnegative(),
    /** The part of completionTokens spent on reasoning, shown apart. */
    reasoningTokens: z.number().int().nonnegative(),
    costMicroChf: z.number().int().nonnegative(),
    priceTableVersion: z.string(),
    outcome: z.enum(["finished", "length", "cancelled", "failed"]),
    startedAt: z.string(),
    finishedAt: z.string(),
    traceId: z.string().nullable(),
    /**
     * Present on a Batch API line's charge only: the discount (basis points, from the price table
     * version) that costMicroChf applied, so an auditor recomputes the discounted charge.
     */
    batchDiscountBps: z.number().int().min(0).max(10_000).optional(),
  }),
});

export type UsageRecorded = z.infer<typeof UsageRecordedSchema>;

export const completionStreamId = (completionId: string) => `completion-${completionId}`;
export const COMPLETION_STREAM_TYPE = "completion";

/** What one completion cost: appended once to `completion-<id>` at the end of its job. */
export const UsageRecordedDataSchema = UsageRecordedSchema.shape.data;
export type UsageRecordedData = UsageRecorded["data"];
