import type { Context } from "koa";
import type { AppDeps } from "../../../appDeps.ts";
import { requireInference } from "../shared/requireInference.ts";
import { resolveModel } from "../shared/resolveModel.ts";
import type { ResponseShape } from "../shared/serveCompletion.ts";
import { serveNewCompletion } from "../shared/serveCompletion.ts";
import { ChatCompletionRequestSchema } from "./chatCompletionRequestSchema.ts";
import { chatCompletionBody, chatStreamFormat } from "./chatFormat.ts";
import { toEngineChatRequest } from "./toEngineChatRequest.ts";
import { checkRequestSchemas } from "../shared/jsonSchemas/checkRequestSchemas.ts";
import { engineTraits } from "../../../../models/engineTraits.ts";
import { validated } from "../../../http/validate.ts";
import { assertPromptFits } from "../../admission/promptLengthLimit.ts";

/** chat.completion bodies and chat.completion.chunk streams. */
export const chatResponseShape: ResponseShape = { streamFormat: chatStreamFormat, body: chatCompletionBody };

/** POST /v1/chat/completions, after validation: enqueue the job, then stream or collect the reply. */
export function chatCompletionHandler(deps: AppDeps) {
  return async function createChatCompletion(ctx: Context): Promise<void> {
    const body = validated(ctx, ChatCompletionRequestSchema);
    const inference = requireInference(deps);
    const model = resolveModel(inference.registry, body.model, "chat");
    const work = { kind: "chat" as const, request: toEngineChatRequest(body, model) };
    // The cheap bound first: a prompt (its schemas' text included) longer than the context takes in
    // characters is refused before its schemas are compiled (tens of thousands of schema values took a
    // few hundred milliseconds of the event loop before that refusal).
    assertPromptFits("chat.completions", work, model.context_length);
    checkRequestSchemas(body, inference.schemas, engineTraits(model).grammarEnforcedSchemas);
    await serveNewCompletion(deps, inference, ctx, {
      model,
      endpoint: "chat.completions",
      idPrefix: "chatcmpl",
      work,
      stream: body.stream === true,
      includeUsage: body.stream_options?.include_usage === true,
      shape: chatResponseShape,
      body,
    });
  };
}
