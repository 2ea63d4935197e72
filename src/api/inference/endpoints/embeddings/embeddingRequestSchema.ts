import { z } from "zod";

/** POST /v1/embeddings (spec 4.5): a string or an array of strings, none empty. */
export const EmbeddingRequestSchema = z.strictObject({
  model: z.string().min(1),
  input: z.union([
    z.string().min(1, "input must not be empty"),
    z.array(z.string().min(1, "input must not contain empty strings")).min(1, "input must not be empty").max(2048),
  ]),
  encoding_format: z.enum(["float", "base64"]).nullish(),
  /** Fewer dimensions (truncated and renormalised), for models whose registry entry allows it. */
  dimensions: z.number().int().min(1).nullish(),
  user: z.string().max(256).nullish(),
});

export type EmbeddingRequest = z.infer<typeof EmbeddingRequestSchema>;
