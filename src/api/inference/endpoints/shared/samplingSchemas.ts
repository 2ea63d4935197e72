import { z } from "zod";
import type { SamplingDefaults } from "../../../../models/modelRegistrySchema.ts";

/** Request fields shared by chat and text completions, with the spec's ranges. */
export const samplingFields = {
  model: z.string().min(1),
  max_tokens: z.number().int().min(1).nullish(),
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().min(0).max(1).nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.strictObject({ include_usage: z.boolean().optional() }).nullish(),
  stop: z.union([z.string().min(1), z.array(z.string().min(1)).max(4)], "expected a non-empty string or an array of up to 4 non-empty strings").nullish(),
  presence_penalty: z.number().min(-2).max(2).nullish(),
  frequency_penalty: z.number().min(-2).max(2).nullish(),
  seed: z
    .number()
    .int()
    .min(-(2 ** 53) + 1)
    .max(2 ** 53 - 1)
    .nullish(),
  /** Only one choice per request is served. */
  n: z.literal(1).nullish(),
  /** End-user id for the caller's own tracking; accepted and not used. */
  user: z.string().max(256).nullish(),
  /** Token id (the model's vocabulary, as decimal text) -> -100..100 added to its logit; honoured. */
  logit_bias: z
    .record(z.string().regex(/^\d{1,9}$/, "keys must be token ids (decimal integers)"), z.number().min(-100).max(100))
    .refine((bias) => Object.keys(bias).length <= 1024, "at most 1024 token ids")
    .nullish(),
};

export function stopList(stop: string | string[] | null | undefined): string[] | undefined {
  if (stop === null || stop === undefined) return undefined;
  const list = typeof stop === "string" ? [stop] : stop;
  return list.length ? list : undefined;
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
  const stop = stopList(body.stop);
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
