import { validate } from "../../../http/validate.ts";
import type { EndpointFamily } from "../shared/endpointFamily.ts";
import { embeddingHandler } from "./embeddingHandler.ts";
import { EMBEDDING_PARAMETERS } from "./embeddingParameters.ts";
import { EmbeddingRequestSchema } from "./embeddingRequestSchema.ts";

/** POST /v1/embeddings. */
export const embeddingsEndpoint: EndpointFamily = {
  name: "embeddings",
  served: { capability: "embeddings", parameters: EMBEDDING_PARAMETERS },
  routes(router, deps) {
    router.post("/v1/embeddings", validate(EmbeddingRequestSchema), embeddingHandler(deps));
  },
};
