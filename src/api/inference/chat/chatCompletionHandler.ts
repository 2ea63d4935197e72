import type { Context } from "koa";
import type { AppDeps } from "../../appDeps.ts";
import { nullIfReleased } from "../run/inferenceGateway.ts";
import { collectReply } from "../run/collectReply.ts";
import { relayStream } from "../run/relayStream.ts";
import { requireInference } from "../requireInference.ts";
import { resolveModel } from "../resolveModel.ts";
import { SseResponse } from "../sse/sseResponse.ts";
import { releaseOnDisconnect, startInferenceJob } from "../startInferenceJob.ts";
import { chatCompletionBody, chatStreamFormat } from "./chatFormat.ts";
import type { ChatCompletionRequest } from "./chatCompletionRequestSchema.ts";
import { toEngineChatRequest } from "./toEngineChatRequest.ts";

/** POST /v1/chat/completions, after validation: enqueue the job, then stream or collect the reply. */
export function chatCompletionHandler(deps: AppDeps) {
  return async function createChatCompletion(ctx: Context): Promise<void> {
    const body = ctx.state.body as ChatCompletionRequest;
    const inference = requireInference(deps);
    const model = resolveModel(inference.registry, body.model, "chat");
    const request = toEngineChatRequest(body, model);
    const { job, completionId, created } = await startInferenceJob(deps, inference, ctx, {
      model,
      endpoint: "chat.completions",
      idPrefix: "chatcmpl",
      work: { kind: "chat", request },
    });
    const head = { id: completionId, created, model: model.id, reasoning: model.capabilities.reasoning };
    if (body.stream === true) {
      const includeUsage = body.stream_options?.include_usage === true;
      const sse = new SseResponse(ctx, () => job.release());
      await relayStream(job, sse, chatStreamFormat({ ...head, includeUsage }), includeUsage);
      return;
    }
    releaseOnDisconnect(ctx, job);
    const collected = await collectReply(job).catch(nullIfReleased);
    if (collected) ctx.body = chatCompletionBody(head, collected);
  };
}
