import { z } from "zod";
import { EngineChatRequestSchema } from "./engineRequestSchemas.ts";
import { LaneSchema, MAX_PRIORITY } from "./lanes.ts";

export const EndpointSchema = z.enum(["chat.completions", "completions", "embeddings", "responses"]);
export type Endpoint = z.infer<typeof EndpointSchema>;

export const CompletionWorkSchema = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("chat"), request: EngineChatRequestSchema }),
  z.object({ kind: z.literal("embeddings"), input: z.array(z.string()).min(1) }),
]);
export type CompletionWork = z.infer<typeof CompletionWorkSchema>;

/**
 * The data of a RunCompletion job. It carries ids, the request and the trace context, never a secret:
 * the key is identified by its id only.
 */
export const CompletionJobSchema = z
  .object({
    completionId: z.string().min(1),
    endpoint: EndpointSchema,
    model: z.string().min(1),
    accountId: z.string().min(1),
    keyId: z.string().min(1),
    /** Unix seconds, the `created` of the response. */
    created: z.number().int(),
    traceparent: z.string().optional(),
    /** The reply channel of the API process waiting for the answer (InferenceKeys.replyChannel). */
    replyTo: z.string().min(1),
    /**
     * Enqueued while the budget hold was still being placed (speculative admission): the worker records
     * the usage only once the hold is there, and not at all if the admission was refused.
     */
    speculative: z.boolean().optional(),
    /** The scheduling lane (absent: interactive). */
    lane: LaneSchema.optional(),
    /**
     * Whether its client reads it as a stream (absent in jobs queued before it existed: taken as streamed).
     * A request answered whole gets nothing of a reply that fails: such a failure charges nothing.
     */
    streamed: z.boolean().optional(),
    /**
     * How long its replay stream is kept after its last message, in seconds (absent: the retention,
     * COMPLETION_RETENTION_S): a response that is not stored (`store: false`) keeps its text no longer
     * than its API process may still read it.
     */
    replayKeptAfterEndS: z.number().int().min(1).optional(),
    /**
     * A stand-in for a running job that Redis lost (LostJobStandIns): the runs its job had before, so that
     * its own runs are numbered after them (ReplayFence) and it is taken as a job handed out again.
     */
    runsBefore: z.number().int().min(1).optional(),
    /**
     * What the lost job's run had delivered in messages that Redis lost with it (those before the first
     * one its replay stream still holds): charged with what the stream holds, by the run that ends it.
     */
    lostPrefix: z
      .strictObject({
        throughSeq: z.number().int().min(0),
        tokens: z.number().int().min(0),
        reasoning: z.string(),
        uncounted: z.string(),
      })
      .optional(),
    /**
     * The prices its budget hold was placed at (the admitting API process's registry, as published): it is
     * charged at these, whatever registry its worker has (a worker with other prices, in a deploy, charged
     * past the hold and the budget). Absent in jobs queued before it existed: the worker's own prices.
     */
    pricing: z
      .strictObject({
        version: z.string().min(1),
        inputMicroChfPerMillion: z.number().int().min(0),
        outputMicroChfPerMillion: z.number().int().min(0),
        batchDiscountBps: z.number().int().min(0).max(10_000),
      })
      .optional(),
    /** The BullMQ priority it was queued with (lanes.ts: lane and fair-share rank), kept for a re-enqueue. */
    priority: z.number().int().min(1).max(MAX_PRIORITY).optional(),
    /**
     * The tokens counted against the account's and key's per-minute limits at admission, and the rate
     * window they were counted in (TenantCounters): the worker gives back what the job did not use, with
     * the release of its end.
     */
    countedTokens: z.strictObject({ window: z.number().int(), tokens: z.number().int().min(0) }).optional(),
    work: CompletionWorkSchema,
  })
  .strict();
export type CompletionJob = z.infer<typeof CompletionJobSchema>;

export const RUN_COMPLETION = "RunCompletion";
