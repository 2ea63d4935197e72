import { z } from "zod";

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
