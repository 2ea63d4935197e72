import Router from "@koa/router";
import type { AppDeps } from "../appDeps.ts";
import { NotFoundError } from "../http/errors.ts";
import type { RegisteredModel } from "../../models/modelRegistry.ts";
import { modelBody } from "./modelBody.ts";

/**
 * GET /v1/models: the registry's models that have a live worker (heartbeat in Redis).
 * GET /v1/models/{model}: one of them, or 404 model_not_found.
 * Authentication is done by inferenceAuthRoutes, mounted before this router.
 */
export function modelsRoutes(deps: AppDeps): Router {
  const router = new Router({ sensitive: true });
  const liveModels = async (): Promise<RegisteredModel[]> => {
    const inference = deps.inference;
    if (!inference) return [];
    const all = inference.registry.all();
    const live = new Set(await inference.presence.liveModels(all.map((m) => m.id)));
    return all.filter((m) => live.has(m.id));
  };
  router.get("/v1/models", async (ctx) => {
    ctx.body = { object: "list", data: (await liveModels()).map(modelBody) };
  });
  router.get("/v1/models/*model", async (ctx) => {
    const id = ctx.params.model ?? "";
    const model = (await liveModels()).find((m) => m.id === id);
    if (!model) {
      // A model of the registry whose workers are all down is not listed, but an inference request for it
      // is a 503 "temporarily unavailable": said so here too (it said the model did not exist).
      const known = deps.inference?.registry.get(id) !== undefined;
      const message = known ? `The model '${id}' is not available right now (no worker serves it); retry later.` : `The model '${id}' does not exist.`;
      throw new NotFoundError(message, { param: "model", code: "model_not_found" });
    }
    ctx.body = modelBody(model);
  });
  return router;
}
