import { z } from "zod";
import { samplingFields } from "../samplingSchemas.ts";

/** POST /v1/completions (spec 4.2): a plain prompt, converted to one user message. */
export const CompletionRequestSchema = z
  .strictObject({
    ...samplingFields,
    prompt: z.union([z.string(), z.array(z.string()).length(1, "only one prompt per request is served")]),
  })
  .superRefine((body, ctx) => {
    if (body.stream_options && body.stream !== true) {
      ctx.addIssue({ code: "custom", path: ["stream_options"], message: "stream_options is only allowed when stream is true." });
    }
  });

export type CompletionRequest = z.infer<typeof CompletionRequestSchema>;
