import { z } from "zod";
import { UsageRecordedDataSchema } from "./usageRecordedEvent.ts";

/**
 * The money event that takes back part or all of a charge its client never got. Appended by the
 * projector's sweeper as version 2 of `completion-<id>` (expecting version 1, the UsageRecorded), so a
 * charge is refunded at most once. It names the amounts taken back: the usage read models subtract its
 * tokens and cost on the day the charge counted for (`chargedAt`, the usage's finishedAt), and the
 * budget takes its cost off the spend of that billing period. Money is integer micro-CHF.
 *
 * It is written when the API ended a request because part of the reply was lost with Redis (nobody can
 * read it whole any more) after the worker had already recorded the whole usage, in the moment before it
 * heard what the client was sent (`undelivered_replies`).
 */
export const UsageRefundedSchema = z.object({
  type: z.literal("UsageRefunded"),
  data: z.object({
    completionId: z.string(),
    accountId: z.string(),
    keyId: z.string(),
    model: z.string(),
    endpoint: UsageRecordedDataSchema.shape.endpoint,
    /** Tokens taken back (each at most the charge's). */
    promptTokens: z.number().int().nonnegative(),
    completionTokens: z.number().int().nonnegative(),
    reasoningTokens: z.number().int().nonnegative(),
    /** Cost taken back: the charge's cost minus the cost of what stays charged, at the charge's price table version. */
    costMicroChf: z.number().int().nonnegative(),
    reason: z.literal("undelivered"),
    /** The completion tokens the client was sent (what stays charged, with the prompt); null: nothing was sent, nothing stays charged. */
    deliveredCompletionTokens: z.number().int().nonnegative().nullable(),
    /** The charge's finishedAt: the day and billing period the refund counts for. */
    chargedAt: z.string(),
    refundedAt: z.string(),
  }),
});

export type UsageRefunded = z.infer<typeof UsageRefundedSchema>;
export type UsageRefundedData = UsageRefunded["data"];
