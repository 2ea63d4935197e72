import { z } from "zod";
import { storableString } from "../../../http/storableText.ts";

/** OpenAI's `metadata` of a request: 16 string pairs at most (keys up to 64 characters, values up to 512;
 * stored with a batch or a response: text PostgreSQL can hold). */
export const MetadataSchema = z
  .record(storableString().max(64), storableString().max(512))
  .refine((pairs) => Object.keys(pairs).length <= 16, "at most 16 key-value pairs")
  .nullish();
