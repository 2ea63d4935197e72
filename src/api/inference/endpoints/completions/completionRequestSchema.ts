import { z } from "zod";
import { samplingFields } from "../shared/samplingSchemas.ts";

/** The most prompts one text completion request may carry (each is a job with its own hold). */
export const MAX_PROMPTS = 16;

/** POST /v1/completions (spec 4.2): a plain prompt, converted to one user message. */
export const CompletionRequestSchema = z
  .object({
    ...samplingFields,
    /** Several prompts: one choice each (not streamed: a streamed request takes one prompt). */
    prompt: z.union([z.string(), z.array(z.string()).min(1, "prompt must not be empty").max(MAX_PROMPTS, `at most ${MAX_PROMPTS} prompts per request`)]),
    /** Legacy completion options that are not served: refused when set (docs/compatibility.md). */
    echo: z.boolean().nullish(),
    suffix: z.string().nullish(),
    logprobs: z.number().int().min(0).max(5).nullish(),
    best_of: z.number().int().min(1).max(20).nullish(),
  })
  .catchall(z.unknown())
  .superRefine((body, ctx) => {
    if (body.stream_options && body.stream !== true) {
      ctx.addIssue({ code: "custom", path: ["stream_options"], message: "stream_options is only allowed when stream is true." });
    }
    if (Array.isArray(body.prompt) && body.prompt.length > 1 && body.stream === true) {
      ctx.addIssue({ code: "custom", path: ["prompt"], message: "a streamed completion takes one prompt; send several prompts without stream." });
    }
    if (body.echo === true) ctx.addIssue({ code: "custom", path: ["echo"], message: "echo is not supported: the prompt is not returned." });
    if (body.suffix) ctx.addIssue({ code: "custom", path: ["suffix"], message: "suffix is not supported (no insertion / fill-in-the-middle)." });
    if (body.logprobs != null) {
      ctx.addIssue({ code: "custom", path: ["logprobs"], message: "logprobs is not supported on /v1/completions; /v1/chat/completions returns them." });
    }
    if (body.best_of != null && body.best_of !== 1)
      ctx.addIssue({ code: "custom", path: ["best_of"], message: "best_of is not supported: one candidate is generated." });
  });

export type CompletionRequest = z.infer<typeof CompletionRequestSchema>;

/** The OpenAI fields of a text completion request; any other field is a backend-specific parameter. */
export const COMPLETION_REQUEST_FIELDS: ReadonlySet<string> = new Set(Object.keys(CompletionRequestSchema.shape));
