import { z } from "zod";
import { itemsInOrder } from "../shared/itemsInOrder.ts";
import type { ParameterTable } from "../shared/requestParameters.ts";

/**
 * Token ids (OpenAI's tokenizer's, an array of numbers or of arrays of numbers): the models here have
 * tokenizers of their own, so only text is embedded (spec 4.5). LangChain's OpenAIEmbeddings sends token
 * ids by default; the 400 says how to make it send text. Only the first element is looked at.
 */
const TOKEN_IDS_REFUSED =
  "token ids are not accepted, send the text: a string or an array of strings (LangChain's OpenAIEmbeddings sends text with check_embedding_ctx_length=False)";

function isTokenIds(value: unknown): boolean {
  if (!Array.isArray(value) || value.length === 0) return false;
  const first: unknown = value[0];
  return typeof first === "number" || (Array.isArray(first) && typeof first[0] === "number");
}

/**
 * Every parameter of POST /v1/embeddings (spec 4.5): the request schema (embeddingRequestSchema.ts) and
 * the models API's `supported_parameters` derive from it.
 */
export const EMBEDDING_PARAMETERS = {
  model: { schema: z.string().min(1), policy: "honoured", listed: false },
  /** A string or an array of strings, none empty. */
  input: {
    schema: z.preprocess(
      (value, ctx) => {
        if (isTokenIds(value)) ctx.addIssue({ code: "custom", message: TOKEN_IDS_REFUSED, input: value });
        return value;
      },
      z.union([
        z.string().min(1, "input must not be empty"),
        itemsInOrder(z.string().min(1, "input must not contain empty strings"), z.array(z.unknown()).min(1, "input must not be empty").max(2048)),
      ]),
    ),
    policy: "honoured",
    listed: false,
  },
  encoding_format: { schema: z.enum(["float", "base64"]).nullish(), policy: "honoured" },
  /** Fewer dimensions (truncated and renormalised), for models whose registry entry allows it. */
  dimensions: { schema: z.number().int().min(1).nullish(), policy: "honoured", listed: (model) => model.truncatable_embeddings === true },
  /** End-user id for the caller's own tracking. */
  user: { schema: z.string().max(256).nullish(), policy: "ignored", listed: true },
} as const satisfies ParameterTable;
