import { z } from "zod";
import { schemaShape } from "../shared/requestParameters.ts";
import { COMPLETION_PARAMETERS } from "./completionParameters.ts";

/** POST /v1/completions (spec 4.2): a plain prompt, converted to one user message; one field per parameter of COMPLETION_PARAMETERS. */
export const CompletionRequestSchema = z
  .object(schemaShape(COMPLETION_PARAMETERS))
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
