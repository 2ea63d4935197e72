import { z } from "zod";
import type { ParameterTable } from "../shared/requestParameters.ts";
import { samplingFields } from "../shared/samplingSchemas.ts";

/** The most prompts one text completion request may carry (each is a job with its own hold). */
export const MAX_PROMPTS = 16;

/**
 * Every parameter of POST /v1/completions (spec 4.2), in the order of its schema: the request schema
 * (completionRequestSchema.ts) and the models API's `supported_parameters` derive from it.
 */
export const COMPLETION_PARAMETERS = {
  model: { schema: samplingFields.model, policy: "honoured", listed: false },
  max_tokens: { schema: samplingFields.max_tokens, policy: "honoured" },
  temperature: { schema: samplingFields.temperature, policy: "honoured" },
  top_p: { schema: samplingFields.top_p, policy: "honoured" },
  stream: { schema: samplingFields.stream, policy: "honoured" },
  stream_options: { schema: samplingFields.stream_options, policy: "honoured" },
  stop: { schema: samplingFields.stop, policy: "honoured" },
  presence_penalty: { schema: samplingFields.presence_penalty, policy: "honoured" },
  frequency_penalty: { schema: samplingFields.frequency_penalty, policy: "honoured" },
  seed: { schema: samplingFields.seed, policy: "honoured" },
  /** Only one choice per prompt is served (n: 1). */
  n: { schema: samplingFields.n, policy: "honoured", listed: false },
  /** End-user id for the caller's own tracking (listed: a client may send it to any completions model). */
  user: { schema: samplingFields.user, policy: "ignored", listed: true },
  logit_bias: { schema: samplingFields.logit_bias, policy: "honoured" },
  /** Several prompts: one choice each (not streamed: a streamed request takes one prompt). */
  prompt: {
    schema: z.union([z.string(), z.array(z.string()).min(1, "prompt must not be empty").max(MAX_PROMPTS, `at most ${MAX_PROMPTS} prompts per request`)]),
    policy: "honoured",
    listed: false,
  },
  /** Legacy completion options that are not served: refused when set (docs/compatibility.md). */
  echo: { schema: z.boolean().nullish(), policy: "refused" },
  suffix: { schema: z.string().nullish(), policy: "refused" },
  logprobs: { schema: z.number().int().min(0).max(5).nullish(), policy: "refused" },
  best_of: { schema: z.number().int().min(1).max(20).nullish(), policy: "refused" },
} as const satisfies ParameterTable;
