import { z } from "zod";

/**
 * Why a job is stopped, published on InferenceKeys.cancelChannel:
 * - refused: its speculative admission was refused: nothing is charged;
 * - user: the owner cancelled it (POST .../{id}/cancel): the tokens generated so far are charged;
 * - abandoned: nobody listened for the grace period after the last client went away: likewise.
 */
export const CancelReasonSchema = z.enum(["refused", "user", "abandoned"]);
export type CancelReason = z.infer<typeof CancelReasonSchema>;

export const CancelMessageSchema = z.object({ completionId: z.string().min(1), reason: CancelReasonSchema }).strict();
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
