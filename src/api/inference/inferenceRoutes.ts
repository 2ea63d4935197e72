import Router from "@koa/router";
import type { AppDeps } from "../appDeps.ts";
import { validate } from "../http/validate.ts";
import { chatCompletionHandler, chatResponseShape } from "./endpoints/chat/chatCompletionHandler.ts";
import { ChatCompletionRequestSchema } from "./endpoints/chat/chatCompletionRequestSchema.ts";
import { completionHandler, textResponseShape } from "./endpoints/completions/completionHandler.ts";
import { cancelStoredCompletion, getStoredCompletion } from "./endpoints/shared/storedCompletionHandlers.ts";
import { StoredCompletionQuerySchema } from "./endpoints/shared/storedCompletionQuerySchema.ts";
import { CompletionRequestSchema } from "./endpoints/completions/completionRequestSchema.ts";
import { embeddingHandler } from "./endpoints/embeddings/embeddingHandler.ts";
import { EmbeddingRequestSchema } from "./endpoints/embeddings/embeddingRequestSchema.ts";
import { registerResponseRoutes } from "./endpoints/responses/responseRoutes.ts";

/**
 * POST /v1/chat/completions, /v1/completions, /v1/embeddings; GET and cancel of a stored chat or text
 * completion (its owner's keys only). Authentication (403/402) is done by
 * inferenceAuthRoutes, mounted before this router.
 */
export function inferenceRoutes(deps: AppDeps): Router {
  const router = new Router();
  router.post("/v1/chat/completions", validate(ChatCompletionRequestSchema), chatCompletionHandler(deps));
  router.get(
    "/v1/chat/completions/:completionId",
    validate(StoredCompletionQuerySchema, "query"),
    getStoredCompletion(deps, "chat.completions", chatResponseShape),
  );
  router.post("/v1/chat/completions/:completionId/cancel", cancelStoredCompletion(deps, "chat.completions"));
  router.post("/v1/completions", validate(CompletionRequestSchema), completionHandler(deps));
  router.get("/v1/completions/:completionId", validate(StoredCompletionQuerySchema, "query"), getStoredCompletion(deps, "completions", textResponseShape));
  router.post("/v1/completions/:completionId/cancel", cancelStoredCompletion(deps, "completions"));
  router.post("/v1/embeddings", validate(EmbeddingRequestSchema), embeddingHandler(deps));
  registerResponseRoutes(router, deps);
  return router;
}
