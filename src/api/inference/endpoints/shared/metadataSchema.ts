import { z } from "zod";
import { isStorableText, STORABLE_TEXT_MESSAGE, storableString } from "../../../http/storableText.ts";

const MAX_PAIRS = 16;
const MAX_KEY_CHARS = 64;

/**
 * OpenAI's `metadata` of a request: 16 string pairs at most (keys up to 64 characters, values up to 512;
 * stored with a batch or a response: text PostgreSQL can hold). Keys are checked here rather than by
 * the record's key schema, whose failures zod reports only as "Invalid key in record".
 */
export const MetadataSchema = z
  .record(z.string(), storableString().max(512))
  .superRefine((pairs, ctx) => {
    const keys = Object.keys(pairs);
    if (keys.length > MAX_PAIRS) ctx.addIssue({ code: "custom", message: `at most ${MAX_PAIRS} key-value pairs (got ${keys.length})` });
    for (const key of keys) {
      if (key.length > MAX_KEY_CHARS) {
        ctx.addIssue({ code: "custom", path: [key], message: `a key is at most ${MAX_KEY_CHARS} characters (this one has ${key.length})` });
      } else if (!isStorableText(key)) {
        ctx.addIssue({ code: "custom", path: [key], message: `a key ${STORABLE_TEXT_MESSAGE}` });
      }
    }
  })
  .nullish();
