import { chatEndpoint } from "./endpoints/chat/chatEndpoint.ts";
import { completionsEndpoint } from "./endpoints/completions/completionsEndpoint.ts";
import { embeddingsEndpoint } from "./endpoints/embeddings/embeddingsEndpoint.ts";
import { responsesEndpoint } from "./endpoints/responses/responsesEndpoint.ts";
import type { EndpointFamily } from "./endpoints/shared/endpointFamily.ts";

export type { EndpointFamily };

/**
 * Every inference endpoint family, in the order its routes are mounted. A new family is a folder under
 * endpoints/ exporting its EndpointFamily, and one line here.
 */
export const ENDPOINT_FAMILIES: readonly EndpointFamily[] = [chatEndpoint, completionsEndpoint, embeddingsEndpoint, responsesEndpoint];
