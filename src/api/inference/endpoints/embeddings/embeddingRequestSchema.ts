import { z } from "zod";
import { schemaShape } from "../shared/requestParameters.ts";
import { EMBEDDING_PARAMETERS } from "./embeddingParameters.ts";

const KNOWN = new Set(Object.keys(EMBEDDING_PARAMETERS));

/**
 * POST /v1/embeddings (spec 4.5): one field per parameter of EMBEDDING_PARAMETERS, nothing else. A field
 * beyond them set to null means not set (a client that sends every parameter it knows, unset ones as
 * null), as on chat and completions; with a value it is a 400 naming it.
 */
export const EmbeddingRequestSchema = z.preprocess(
  (body) => {
    if (typeof body !== "object" || body === null || Array.isArray(body)) return body;
    let kept: Record<string, unknown> | undefined;
    for (const [name, value] of Object.entries(body)) {
      if (value !== null || KNOWN.has(name)) continue;
      kept ??= { ...body };
      delete kept[name];
    }
    return kept ?? body;
  },
  z.strictObject(schemaShape(EMBEDDING_PARAMETERS)),
);

export type EmbeddingRequest = z.infer<typeof EmbeddingRequestSchema>;
