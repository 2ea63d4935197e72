import { z } from "zod";
import { InvalidRequestError } from "../../../http/errors.ts";

const flag = z.enum(["true", "false"]).transform((v) => v === "true");
const sequence = z
  .string()
  .regex(/^-?\d{1,15}$/, "must be an integer sequence number (an SSE event id)")
  .transform(Number)
  .refine((n) => n >= -1, "must be -1 or more");

/**
 * GET /v1/chat/completions/{id} and /v1/completions/{id}: `stream=true` streams the completion's events
 * (those after `starting_after`, or after the Last-Event-ID header, else all), then follows it live.
 */
export const StoredCompletionQuerySchema = z
  .object({
    stream: flag.optional(),
    starting_after: sequence.optional(),
    include_usage: flag.optional(),
  })
  .strict();
export type StoredCompletionQuery = z.infer<typeof StoredCompletionQuerySchema>;

export const LastEventIdSchema = sequence;

/**
 * The resume point of a stored stream's GET: `starting_after`, else the Last-Event-ID header an
 * EventSource sends back (the `id:` of the last event it read), else -1 (from the start). A header that
 * is no sequence number is a 400 naming the header.
 */
export function resumePoint(startingAfter: number | undefined, lastEventId: string): number {
  if (startingAfter !== undefined) return startingAfter;
  if (!lastEventId) return -1;
  const parsed = LastEventIdSchema.safeParse(lastEventId);
  if (!parsed.success) {
    throw new InvalidRequestError("Invalid 'Last-Event-ID' header: it must be the id of an event of this stream (an integer, -1 or more).", {
      param: "Last-Event-ID",
      code: "invalid_value",
    });
  }
  return parsed.data;
}
