import type { Context } from "koa";
import type { AppDeps } from "../../appDeps.ts";
import { admitWithHold } from "../../usage/budget/admitWithHold.ts";
import { newCompletionId } from "../completionId.ts";
import { nullIfReleased } from "../run/inferenceGateway.ts";
import { collectReply } from "../run/collectReply.ts";
import { currentTraceparent } from "../run/currentTraceparent.ts";
import { relayStream } from "../run/relayStream.ts";
import { principalOf, requireInference } from "../requireInference.ts";
import { resolveModel } from "../resolveModel.ts";
import { SseResponse } from "../sse/sseResponse.ts";
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
    const principal = principalOf(ctx);
    const completionId = newCompletionId("chatcmpl");
    const created = Math.floor(deps.clock.now().getTime() / 1000);
    const traceparent = currentTraceparent();
    // Admission: hold the worst-case cost on the monthly budget (429 / 402), released if the job never runs.
    const job = await admitWithHold(deps, { completionId, accountId: principal.accountId, work: { kind: "chat", request }, model }, () =>
      inference.gateway.start({
        completionId,
        endpoint: "chat.completions",
        model: model.id,
        accountId: principal.accountId,
        keyId: principal.keyId,
        created,
        ...(traceparent ? { traceparent } : {}),
        work: { kind: "chat", request },
      }),
    );
    const head = { id: completionId, created, model: model.id, reasoning: model.capabilities.reasoning };
    if (body.stream === true) {
      const includeUsage = body.stream_options?.include_usage === true;
      const sse = new SseResponse(ctx, () => job.release());
      await relayStream(job, sse, chatStreamFormat({ ...head, includeUsage }), includeUsage);
      return;
    }
    ctx.res.on("close", () => {
      if (!ctx.res.writableFinished) job.release();
    });
    const collected = await collectReply(job).catch(nullIfReleased);
    if (collected) ctx.body = chatCompletionBody(head, collected);
  };
}
