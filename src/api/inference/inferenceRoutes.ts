import Router from "@koa/router";
import type { AppDeps } from "../appDeps.ts";
import { validate } from "../http/validate.ts";
import { chatCompletionHandler } from "./chat/chatCompletionHandler.ts";
import { ChatCompletionRequestSchema } from "./chat/chatCompletionRequestSchema.ts";
import { completionHandler } from "./completions/completionHandler.ts";
import { CompletionRequestSchema } from "./completions/completionRequestSchema.ts";
import { embeddingHandler } from "./embeddings/embeddingHandler.ts";
import { EmbeddingRequestSchema } from "./embeddings/embeddingRequestSchema.ts";

/**
 * POST /v1/chat/completions, /v1/completions, /v1/embeddings. Authentication (403/402) is done by
 * inferenceAuthRoutes, mounted before this router.
 */
export function inferenceRoutes(deps: AppDeps): Router {
  const router = new Router();
  router.post("/v1/chat/completions", validate(ChatCompletionRequestSchema), chatCompletionHandler(deps));
  router.post("/v1/completions", validate(CompletionRequestSchema), completionHandler(deps));
  router.post("/v1/embeddings", validate(EmbeddingRequestSchema), embeddingHandler(deps));
  return router;
}
