import type { Context } from "koa";
import type { AppDeps } from "../../../appDeps.ts";
import { InvalidRequestError } from "../../../http/errors.ts";
import type { EngineChatRequest } from "../../../../contracts/engineRequestSchemas.ts";
import { type ResponseShape, serveNewCompletion } from "../shared/serveCompletion.ts";
import { requireInference } from "../shared/requireInference.ts";
import { resolveModel } from "../shared/resolveModel.ts";
import { samplingParams } from "../shared/samplingSchemas.ts";
import { completionStreamFormat, textCompletionBody } from "./completionFormat.ts";
import { COMPLETION_REQUEST_FIELDS, type CompletionRequest, CompletionRequestSchema } from "./completionRequestSchema.ts";
import { backendParameters } from "../shared/backendParameters.ts";
import { serveMultiPromptCompletion } from "./multiPromptCompletion.ts";
import { validated } from "../../../http/validate.ts";
import type { RegisteredModel } from "../../../../models/modelRegistry.ts";

export const COMPLETIONS_DEFAULT_MAX_TOKENS = 16;

/** text_completion bodies and streams. */
export const textResponseShape: ResponseShape = { streamFormat: completionStreamFormat, body: textCompletionBody };

/**
 * POST /v1/completions: the prompt becomes one user message of a chat, on the same queue path; several
 * prompts (not streamed) become one job each and one choice each (serveMultiPromptCompletion).
 */
export function completionHandler(deps: AppDeps) {
  return async function createCompletion(ctx: Context): Promise<void> {
    const body = validated(ctx, CompletionRequestSchema);
    const inference = requireInference(deps);
    const model = resolveModel(inference.registry, body.model, "completions");
    const requests = completionRequests(body, model);
    if (requests.length > 1) {
      if (ctx.get("idempotency-key")) {
        throw new InvalidRequestError("An Idempotency-Key names one completion; send several prompts without it.", {
          param: "Idempotency-Key",
          code: "invalid_value",
        });
      }
      await serveMultiPromptCompletion(deps, inference, ctx, { model, requests });
      return;
    }
    const request = requests[0]!;
    await serveNewCompletion(deps, inference, ctx, {
      model,
      endpoint: "completions",
      idPrefix: "cmpl",
      work: { kind: "chat", request },
      stream: body.stream === true,
      includeUsage: body.stream_options?.include_usage === true,
      shape: textResponseShape,
      body,
    });
  };
}

/** The engine request of each prompt of a validated request (400 for a max_tokens the model cannot hold); shared with batch lines. */
export function completionRequests(body: CompletionRequest, model: RegisteredModel): EngineChatRequest[] {
  const maxTokens = body.max_tokens ?? COMPLETIONS_DEFAULT_MAX_TOKENS;
  if (maxTokens >= model.context_length) {
    throw new InvalidRequestError(`max_tokens is too large: ${maxTokens}. This model's context length is ${model.context_length} tokens.`, {
      param: "max_tokens",
      code: "invalid_value",
    });
  }
  const prompts = typeof body.prompt === "string" ? [body.prompt] : body.prompt;
  const extra = backendParameters(body, COMPLETION_REQUEST_FIELDS, model);
  return prompts.map((prompt) => ({
    messages: [{ role: "user", content: prompt }],
    maxTokens,
    ...(body.max_tokens != null ? { maxTokensGiven: true } : {}),
    ...samplingParams(body, model.defaults),
    ...(extra ? { extra } : {}),
  }));
}
