import { z } from "zod";
import { MAX_STOP_SEQUENCE_CHARS, MAX_STOP_SEQUENCES } from "../../../../contracts/engineRequestSchemas.ts";
import type { SamplingDefaults } from "../../../../models/modelRegistrySchema.ts";
import { parseWith } from "../../../http/validate.ts";
import type { ParameterTable } from "./requestParameters.ts";

/**
 * One stop sequence. The embedded engine's stop detector costs a map per character of each sequence: a
 * longer one is refused here, where the union names it (`stop`, `stop[1]`) with this message.
 */
const stopSequence = z
  .string()
  .min(1)
  .max(MAX_STOP_SEQUENCE_CHARS, {
    error: (issue) => `a stop sequence is at most ${MAX_STOP_SEQUENCE_CHARS} characters long (this one has ${String(issue.input).length}).`,
  });

/**
 * A bound on tokens to generate (max_tokens, max_completion_tokens, max_output_tokens): a positive integer.
 * One past 2^53 is named too large for the model, not for JavaScript (zod's own words named 9007199254740991);
 * the model's context length, which bounds it, is checked with the model.
 */
export const tokenBoundSchema = z
  .number()
  .int({
    error: (issue) =>
      typeof issue.input === "number" && Number.isInteger(issue.input)
        ? "too large: at most the model's context length (context_length in GET /v1/models)."
        : undefined,
  })
  .min(1);

/**
 * The parameters chat and text completions share, with the spec's ranges, in the order that opens both
 * endpoints' parameter tables (CHAT_PARAMETERS, COMPLETION_PARAMETERS spread it first).
 */
export const SAMPLING_PARAMETERS = {
  model: { schema: z.string().min(1), policy: "honoured", listed: false },
  max_tokens: { schema: tokenBoundSchema.nullish(), policy: "honoured" },
  temperature: { schema: z.number().min(0).max(2).nullish(), policy: "honoured" },
  top_p: { schema: z.number().min(0).max(1).nullish(), policy: "honoured" },
  stream: { schema: z.boolean().nullish(), policy: "honoured" },
  /** `include_obfuscation` is accepted and ignored (no obfuscation padding is sent). */
  stream_options: {
    schema: z.strictObject({ include_usage: z.boolean().optional(), include_obfuscation: z.boolean().nullish() }).nullish(),
    policy: "honoured",
  },
  /** Up to 4 sequences of at most MAX_STOP_SEQUENCE_CHARS characters each; a longer one is a 400 naming it (`stop`, `stop[1]`). */
  stop: {
    schema: z
      .union(
        [stopSequence, z.array(stopSequence).max(MAX_STOP_SEQUENCES)],
        `expected a non-empty string or an array of up to ${MAX_STOP_SEQUENCES} non-empty strings`,
      )
      .nullish(),
    policy: "honoured",
  },
  presence_penalty: { schema: z.number().min(-2).max(2).nullish(), policy: "honoured" },
  frequency_penalty: { schema: z.number().min(-2).max(2).nullish(), policy: "honoured" },
  seed: {
    schema: z
      .number()
      .int()
      .min(-(2 ** 53) + 1)
      .max(2 ** 53 - 1)
      .nullish(),
    policy: "honoured",
  },
  /** Only one choice is served per request (per prompt, for text completions): n: 1. */
  n: { schema: z.literal(1).nullish(), policy: "honoured", listed: false },
  /** End-user id for the caller's own tracking, accepted and not used (listed: a client may send it to any model of the endpoint). */
  user: { schema: z.string().max(256).nullish(), policy: "ignored", listed: true },
  /** Token id (the model's vocabulary, as decimal text) -> -100..100 added to its logit; honoured. */
  logit_bias: {
    schema: z
      .record(z.string().regex(/^\d{1,9}$/, "keys must be token ids (decimal integers)"), z.number().min(-100).max(100))
      .refine((bias) => Object.keys(bias).length <= 1024, "at most 1024 token ids")
      .nullish(),
    policy: "honoured",
  },
} as const satisfies ParameterTable;

export function stopList(stop: string | string[] | null | undefined): string[] | undefined {
  if (stop === null || stop === undefined) return undefined;
  const list = typeof stop === "string" ? [stop] : stop;
  return list.length ? list : undefined;
}

const StopSchema = z.object({ stop: SAMPLING_PARAMETERS.stop.schema });

/**
 * The stop sequences, checked again here: the Responses API takes chat's sampling fields as they come
 * (beyond its own parameters, unchecked by its schema), so this is where its `stop` meets the bound (a
 * 400 naming `stop` or `stop[i]`). Chat and completions checked it already (4 short strings at most).
 */
function checkedStop(stop: unknown): string | string[] | null | undefined {
  return parseWith(StopSchema, { stop }).stop;
}

type SamplingBody = {
  logit_bias?: Record<string, number> | null;
  temperature?: number | null;
  top_p?: number | null;
  presence_penalty?: number | null;
  frequency_penalty?: number | null;
  seed?: number | null;
  stop?: string | string[] | null;
};

/**
 * The engine's sampling parameters from the shared request fields: what the client set, else the model's
 * registry `defaults`, else nothing (the engine's own default applies: an upstream backend's, or the
 * embedded engine's OpenAI defaults).
 */
export function samplingParams(body: SamplingBody, defaults: SamplingDefaults = {}) {
  const stop = stopList(checkedStop(body.stop));
  const temperature = body.temperature ?? defaults.temperature;
  const topP = body.top_p ?? defaults.top_p;
  const presencePenalty = body.presence_penalty ?? defaults.presence_penalty;
  const frequencyPenalty = body.frequency_penalty ?? defaults.frequency_penalty;
  return {
    ...(temperature === undefined ? {} : { temperature }),
    ...(topP === undefined ? {} : { topP }),
    ...(presencePenalty === undefined ? {} : { presencePenalty }),
    ...(frequencyPenalty === undefined ? {} : { frequencyPenalty }),
    ...(body.seed != null ? { seed: body.seed } : {}),
    ...(body.logit_bias != null && Object.keys(body.logit_bias).length > 0 ? { logitBias: body.logit_bias } : {}),
    ...(stop ? { stop } : {}),
  };
}
