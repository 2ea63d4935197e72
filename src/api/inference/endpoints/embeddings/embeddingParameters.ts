import { z } from "zod";
import type { ParameterTable } from "../shared/requestParameters.ts";

/**
 * Every parameter of POST /v1/embeddings (spec 4.5): the request schema (embeddingRequestSchema.ts) and
 * the models API's `supported_parameters` derive from it.
 */
export const EMBEDDING_PARAMETERS = {
  model: { schema: z.string().min(1), policy: "honoured", listed: false },
  /** A string or an array of strings, none empty. */
  input: {
    schema: z.union([
      z.string().min(1, "input must not be empty"),
      z.array(z.string().min(1, "input must not contain empty strings")).min(1, "input must not be empty").max(2048),
    ]),
    policy: "honoured",
    listed: false,
  },
  encoding_format: { schema: z.enum(["float", "base64"]).nullish(), policy: "honoured" },
  /** Fewer dimensions (truncated and renormalised), for models whose registry entry allows it. */
  dimensions: { schema: z.number().int().min(1).nullish(), policy: "honoured", listed: (model) => model.truncatable_embeddings === true },
  /** End-user id for the caller's own tracking. */
  user: { schema: z.string().max(256).nullish(), policy: "ignored" },
} as const satisfies ParameterTable;
