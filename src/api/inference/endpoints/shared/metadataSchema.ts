import { z } from "zod";

/** OpenAI's `metadata` of a request: 16 string pairs at most (keys up to 64 characters, values up to 512). */
export const MetadataSchema = z
  .record(z.string().max(64), z.string().max(512))
  .refine((pairs) => Object.keys(pairs).length <= 16, "at most 16 key-value pairs")
  .nullish();
