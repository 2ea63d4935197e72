import type { Context } from "koa";
import type { AppDeps } from "../../../appDeps.ts";
import { nullIfReleased } from "../../jobs/runningJob.ts";
import { collectEmbeddings } from "../../jobs/collectReply.ts";
import { requireInference } from "../shared/requireInference.ts";
import { resolveModel, unsupportedParameter } from "../shared/resolveModel.ts";
import { InvalidRequestError } from "../../../http/errors.ts";
import { truncatedEmbedding } from "./truncatedEmbedding.ts";
import { newCompletionId } from "../../jobs/completionId.ts";
import { releaseOnDisconnect } from "../../jobs/releaseOnDisconnect.ts";
import { EmbeddingRequestSchema } from "./embeddingRequestSchema.ts";
import { validated } from "../../../http/validate.ts";

/**
 * POST /v1/embeddings: through the same queue; `encoding_format: "base64"` gives little-endian float32;
 * `dimensions` (models with truncatable_embeddings only) shortens each vector and renormalises it.
 */
export function embeddingHandler(deps: AppDeps) {
  return async function createEmbeddings(ctx: Context): Promise<void> {
    const body = validated(ctx, EmbeddingRequestSchema);
    const inference = requireInference(deps);
    const model = resolveModel(inference.registry, body.model, "embeddings");
    const dimensions = body.dimensions ?? null;
    if (dimensions !== null && !model.truncatable_embeddings)
      throw unsupportedParameter(model, "dimensions", "dimensions (its embeddings cannot be shortened)");
    if (dimensions !== null && dimensions > (model.embedding_dimensions ?? 0)) {
      throw new InvalidRequestError(`Invalid 'dimensions': the model '${model.id}' gives ${model.embedding_dimensions} dimensions at most.`, {
        param: "dimensions",
        code: "invalid_value",
      });
    }
    const input = typeof body.input === "string" ? [body.input] : body.input;
    const completionId = newCompletionId("embd");
    const created = Math.floor(deps.clock.now().getTime() / 1000);
    const job = await inference.jobs.start(ctx, {
      model,
      endpoint: "embeddings",
      completionId,
      created,
      work: { kind: "embeddings", input },
      stream: false,
    }).started;
    releaseOnDisconnect(ctx, job);
    const collected = await collectEmbeddings(job).catch(nullIfReleased);
    if (!collected) return;
    const { usage } = collected;
    const embeddings = dimensions === null ? collected.embeddings : collected.embeddings.map((vector) => truncatedEmbedding(vector, dimensions));
    const base64 = body.encoding_format === "base64";
    ctx.body = {
      object: "list",
      data: embeddings.map((vector, index) => ({ object: "embedding", index, embedding: base64 ? toBase64Float32(vector) : vector })),
      model: model.id,
      usage: { prompt_tokens: usage.promptTokens, total_tokens: usage.promptTokens },
    };
  };
}

function toBase64Float32(vector: number[]): string {
  return Buffer.from(new Float32Array(vector).buffer).toString("base64");
}
