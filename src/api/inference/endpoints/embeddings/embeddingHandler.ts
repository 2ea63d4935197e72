import type { Context } from "koa";
import type { AppDeps } from "../../../appDeps.ts";
import { nullIfReleased } from "../../jobs/runningJob.ts";
import { type CollectedEmbeddings, collectEmbeddings } from "../../jobs/collectReply.ts";
import type { InferenceServices } from "../shared/requireInference.ts";
import type { RegisteredModel } from "../../../../models/modelRegistry.ts";
import { requireInference } from "../shared/requireInference.ts";
import { resolveModel, unsupportedParameter } from "../shared/resolveModel.ts";
import { InvalidRequestError } from "../../../http/errors.ts";
import { truncatedEmbedding } from "./truncatedEmbedding.ts";
import { newCompletionId } from "../../jobs/completionId.ts";
import { releaseOnDisconnect } from "../../jobs/releaseOnDisconnect.ts";
import { type EmbeddingRequest, EmbeddingRequestSchema } from "./embeddingRequestSchema.ts";
import { validated } from "../../../http/validate.ts";
import { COMPLETION_ID_HEADER, claimIdempotencyKey, followExistingCompletion } from "../shared/serveCompletion.ts";

/**
 * POST /v1/embeddings: through the same queue; `encoding_format: "base64"` gives little-endian float32,
 * and `float` the same float32 values as JSON numbers (a client gets one vector whichever it asks for);
 * `dimensions` (models with truncatable_embeddings only) shortens each vector and renormalises it. With
 * an Idempotency-Key used before by this API key for the same body, the request answers that request's
 * embeddings (charged once); with another body it is refused.
 */
export function embeddingHandler(deps: AppDeps) {
  return async function createEmbeddings(ctx: Context): Promise<void> {
    const body = validated(ctx, EmbeddingRequestSchema);
    const inference = requireInference(deps);
    const { model, input } = embeddingWork(inference, body);
    const completionId = newCompletionId("embd");
    const claim = await claimIdempotencyKey(inference, ctx, "embeddings", body, completionId);
    const created = Math.floor(deps.clock.now().getTime() / 1000);
    const job = claim.existing
      ? await followExistingCompletion(inference, ctx, claim.existing, -1)
      : await inference.jobs
          .start(ctx, {
            model,
            endpoint: "embeddings",
            completionId,
            created,
            work: { kind: "embeddings", input },
            stream: false,
          })
          .started.then(
            (started) => {
              // The id its charge is recorded under (as chat's and completions' answers carry it).
              ctx.set(COMPLETION_ID_HEADER, completionId);
              return started;
            },
            async (error: unknown) => {
              await claim.giveBack();
              throw error;
            },
          );
    releaseOnDisconnect(ctx, job);
    const collected = await collectEmbeddings(job).catch(nullIfReleased);
    if (!collected) return;
    ctx.body = embeddingsBody(body, model, collected);
  };
}

/** The model and inputs of a validated request (400 for dimensions the model cannot give); shared with batch lines. */
export function embeddingWork(inference: InferenceServices, body: EmbeddingRequest): { model: RegisteredModel; input: string[] } {
  const model = resolveModel(inference.registry, body.model, "embeddings");
  const dimensions = body.dimensions ?? null;
  if (dimensions !== null && !model.truncatable_embeddings) throw unsupportedParameter(model, "dimensions", "dimensions (its embeddings cannot be shortened)");
  if (dimensions !== null && dimensions > (model.embedding_dimensions ?? 0)) {
    throw new InvalidRequestError(`Invalid 'dimensions': the model '${model.id}' gives ${model.embedding_dimensions} dimensions at most.`, {
      param: "dimensions",
      code: "invalid_value",
    });
  }
  return { model, input: typeof body.input === "string" ? [body.input] : body.input };
}

/** The `list` of embeddings answered for a request. */
export function embeddingsBody(body: EmbeddingRequest, model: RegisteredModel, collected: CollectedEmbeddings): unknown {
  const dimensions = body.dimensions ?? null;
  const { usage } = collected;
  const embeddings = dimensions === null ? collected.embeddings : collected.embeddings.map((vector) => truncatedEmbedding(vector, dimensions));
  const base64 = body.encoding_format === "base64";
  return {
    object: "list",
    data: embeddings.map((vector, index) => ({ object: "embedding", index, embedding: base64 ? toBase64Float32(vector) : vector.map(Math.fround) })),
    model: model.id,
    usage: { prompt_tokens: usage.promptTokens, total_tokens: usage.promptTokens },
  };
}

function toBase64Float32(vector: number[]): string {
  return Buffer.from(new Float32Array(vector).buffer).toString("base64");
}
