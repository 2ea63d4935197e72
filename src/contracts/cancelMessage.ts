import { z } from "zod";

/**
 * Why a job is stopped, published on InferenceKeys.cancelChannel:
 * - refused: its speculative admission was refused: nothing is charged;
 * - user: the owner cancelled it (POST .../{id}/cancel): the tokens generated so far are charged;
 * - abandoned: nobody listened for the grace period after the last client went away: likewise;
 * - lost: the API ended the request early for a reason of the platform's (part of the reply was lost
 *   with Redis, or the job stayed silent for the idle timeout): only what reached the client is charged,
 *   the deltas numbered up to `deliveredThroughSeq`;
 * - expired: a Batch API line still running when its batch's completion window ended, or its batch was
 *   cancelled: nobody receives its partial reply (the line ends in the error file as expired or
 *   cancelled), so nothing is charged, as for `refused`; its stream ends with a cancelled error.
 */
/** How long a cancel's mark (InferenceKeys.cancelMark) is kept: longer than a job runs after a loss of Redis. */
export const CANCEL_MARK_TTL_SECONDS = 3_600;

export const CancelReasonSchema = z.enum(["refused", "user", "abandoned", "lost", "expired"]);
export type CancelReason = z.infer<typeof CancelReasonSchema>;

export const CancelMessageSchema = z
  .object({
    completionId: z.string().min(1),
    reason: CancelReasonSchema,
    /**
     * The sequence number of the last message the API relayed to the client (-1: none, as for a
     * non-streamed request, whose client gets nothing before the end). With it, the worker charges the
     * prompt and the tokens of its deltas numbered up to it, no more.
     */
    deliveredThroughSeq: z.number().int().min(-1).optional(),
  })
  .strict();
export type CancelMessage = z.infer<typeof CancelMessageSchema>;

export function encodeCancelMessage(message: CancelMessage): string {
  return JSON.stringify(message);
}

/** A message from the channel, or null for a malformed one. A bare completion id (older APIs) is a refusal. */
export function decodeCancelMessage(text: string): CancelMessage | null {
  if (!text.startsWith("{")) return text ? { completionId: text, reason: "refused" } : null;
  try {
    const parsed = CancelMessageSchema.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}
