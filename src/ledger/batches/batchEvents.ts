import { z } from "zod";
import { appendToStream } from "../eventStore/appendToStream.ts";
import type { Queryable } from "../eventStore/types.ts";

export const batchStreamId = (batchId: string) => `batch-${batchId}`;
export const BATCH_STREAM_TYPE = "batch";

const CountsSchema = z.object({ total: z.number().int().nonnegative(), completed: z.number().int().nonnegative(), failed: z.number().int().nonnegative() });

const CreatedDataSchema = z.object({
  batchId: z.string(),
  accountId: z.string(),
  keyId: z.string(),
  endpoint: z.string(),
  inputFileId: z.string(),
  expiresAt: z.string(),
});
const FailedDataSchema = z.object({ batchId: z.string(), errors: z.number().int().nonnegative(), counts: CountsSchema });
const EndedDataSchema = z.object({ batchId: z.string(), counts: CountsSchema });

/** The lifecycle union, with the end events' `accountId` as `accountId` says (required when written, optional when read). */
function lifecycleSchema<A extends z.ZodString | z.ZodOptional<z.ZodString>>(accountId: A) {
  return z.discriminatedUnion("type", [
    z.object({ type: z.literal("BatchCreated"), data: CreatedDataSchema }),
    z.object({ type: z.literal("BatchFailed"), data: FailedDataSchema.extend({ accountId }) }),
    z.object({ type: z.literal("BatchCancelled"), data: EndedDataSchema.extend({ accountId }) }),
    z.object({ type: z.literal("BatchCompleted"), data: EndedDataSchema.extend({ accountId }) }),
    z.object({ type: z.literal("BatchExpired"), data: EndedDataSchema.extend({ accountId }) }),
  ]);
}

/**
 * The lifecycle of a Batch API batch, on its `batch-<id>` stream: auditors see bulk work and its totals.
 * The lines' contents and results stay out of the log (batch_lines); their charges are the lines'
 * UsageRecorded events (batchDiscountBps set). Every event names the batch's account (`accountId`): an
 * account's audit export and the checkpoints' accounts tree take an account's events by it
 * (docs/audit.md), so the stream's head, whichever event it is, is in the account's export.
 */
export const BatchEventSchema = lifecycleSchema(z.string());
export type BatchEvent = z.infer<typeof BatchEventSchema>;

/**
 * A lifecycle event as stored: BatchFailed, BatchCancelled, BatchCompleted and BatchExpired written
 * before they carried `accountId` have none (their stream's BatchCreated names the account; the audit
 * export takes them by it).
 */
export const StoredBatchEventSchema = lifecycleSchema(z.string().optional());
export type StoredBatchEvent = z.infer<typeof StoredBatchEventSchema>;

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
