import { z } from "zod";
import { appendToStream } from "../eventStore/appendToStream.ts";
import type { Queryable } from "../eventStore/types.ts";

export const batchStreamId = (batchId: string) => `batch-${batchId}`;
export const BATCH_STREAM_TYPE = "batch";

const CountsSchema = z.object({ total: z.number().int().nonnegative(), completed: z.number().int().nonnegative(), failed: z.number().int().nonnegative() });

/**
 * The lifecycle of a Batch API batch, on its `batch-<id>` stream: auditors see bulk work and its totals.
 * The lines' contents and results stay out of the log (batch_lines); their charges are the lines'
 * UsageRecorded events (batchDiscountBps set).
 */
export const BatchEventSchema = z.discriminatedUnion("type", [
  z.object({
    type: z.literal("BatchCreated"),
    data: z.object({ batchId: z.string(), accountId: z.string(), keyId: z.string(), endpoint: z.string(), inputFileId: z.string(), expiresAt: z.string() }),
  }),
  z.object({ type: z.literal("BatchFailed"), data: z.object({ batchId: z.string(), errors: z.number().int().nonnegative(), counts: CountsSchema }) }),
  z.object({ type: z.literal("BatchCancelled"), data: z.object({ batchId: z.string(), counts: CountsSchema }) }),
  z.object({ type: z.literal("BatchCompleted"), data: z.object({ batchId: z.string(), counts: CountsSchema }) }),
  z.object({ type: z.literal("BatchExpired"), data: z.object({ batchId: z.string(), counts: CountsSchema }) }),
]);
export type BatchEvent = z.infer<typeof BatchEventSchema>;

/** Appends one lifecycle event (inside the caller's transaction, with the batch row's change). */
export async function appendBatchEvent(db: Queryable, event: BatchEvent, actor: string): Promise<void> {
  const parsed = BatchEventSchema.parse(event);
  await appendToStream(
    db,
    batchStreamId(parsed.data.batchId),
    BATCH_STREAM_TYPE,
    [{ type: parsed.type, data: parsed.data, metadata: { actor } }],
    parsed.type === "BatchCreated" ? "no_stream" : "any",
  );
}
