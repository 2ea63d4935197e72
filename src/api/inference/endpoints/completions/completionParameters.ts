import { z } from "zod";
import { itemsInOrder } from "../shared/itemsInOrder.ts";
import type { ParameterTable } from "../shared/requestParameters.ts";
import { SAMPLING_PARAMETERS } from "../shared/samplingSchemas.ts";

/**
 * The most prompts one text completion request may carry (each is a job with its own hold): LangChain's
 * OpenAI LLM sends its prompts 20 at a time by default.
 */
export const MAX_PROMPTS = 20;

/**
 * Every parameter of POST /v1/completions (spec 4.2), in the order of its schema: the request schema
 * (completionRequestSchema.ts) and the models API's `supported_parameters` derive from it.
 */
export const COMPLETION_PARAMETERS = {
  ...SAMPLING_PARAMETERS,
  /** Several prompts: one choice each (not streamed: a streamed request takes one prompt). */
  prompt: {
    schema: z.union([
      z.string(),
      itemsInOrder(z.string(), z.array(z.unknown()).min(1, "prompt must not be empty").max(MAX_PROMPTS, `at most ${MAX_PROMPTS} prompts per request`)),
    ]),
    policy: "honoured",
    listed: false,
  },
  /** Legacy completion options that are not served: refused when set (docs/compatibility.md). */
  echo: { schema: z.boolean().nullish(), policy: "refused" },
  suffix: { schema: z.string().nullish(), policy: "refused" },
  logprobs: { schema: z.number().int().min(0).max(5).nullish(), policy: "refused" },
  best_of: { schema: z.number().int().min(1).max(20).nullish(), policy: "refused" },
} as const satisfies ParameterTable;
