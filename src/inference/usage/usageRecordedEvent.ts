import { z } from "zod";
import { EndpointSchema } from "../../messaging/completionJob.ts";

export const COMPLETION_STREAM_TYPE = "completion";

export function completionStreamId(completionId: string): string {
  return `completion-${completionId}`;
}

/** What one completion cost: appended once to `completion-<id>` at the end of its job. */
export const UsageRecordedDataSchema = z.object({
  completionId: z.string(),
  accountId: z.string(),
  keyId: z.string(),
  model: z.string(),
  endpoint: EndpointSchema,
  promptTokens: z.number().int().nonnegative(),
  completionTokens: z.number().int().nonnegative(),
  reasoningTokens: z.number().int().nonnegative(),
  costMicroChf: z.number().int().nonnegative(),
  priceTableVersion: z.string(),
  /** completed: the engine finished; failed: it raised (nothing is charged). */
  outcome: z.enum(["completed", "failed"]),
  startedAt: z.iso.datetime(),
  finishedAt: z.iso.datetime(),
  traceId: z.string().nullable(),
});

export type UsageRecordedData = z.infer<typeof UsageRecordedDataSchema>;
export type UsageRecorded = { type: "UsageRecorded"; data: UsageRecordedData };
