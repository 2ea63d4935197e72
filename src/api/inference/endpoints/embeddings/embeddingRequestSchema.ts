import { z } from "zod";
import { schemaShape } from "../shared/requestParameters.ts";
import { EMBEDDING_PARAMETERS } from "./embeddingParameters.ts";

/** POST /v1/embeddings (spec 4.5): one field per parameter of EMBEDDING_PARAMETERS, nothing else. */
export const EmbeddingRequestSchema = z.strictObject(schemaShape(EMBEDDING_PARAMETERS));

export type EmbeddingRequest = z.infer<typeof EmbeddingRequestSchema>;
