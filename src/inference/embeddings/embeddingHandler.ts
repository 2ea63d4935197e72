import type { Context } from "koa";
import type { AppDeps } from "../../appDeps.ts";
import { admitWithHold } from "../../usage/budget/admitWithHold.ts";
import { newCompletionId } from "../completionId.ts";
import { nullIfReleased } from "../run/inferenceGateway.ts";
import { collectEmbeddings } from "../run/collectReply.ts";
import { currentTraceparent } from "../run/currentTraceparent.ts";
import { principalOf, requireInference } from "../requireInference.ts";
import { resolveModel } from "../resolveModel.ts";
import type { EmbeddingRequest } from "./embeddingRequestSchema.ts";

/** POST /v1/embeddings: through the same queue; `encoding_format: "base64"` gives little-endian float32. */
export function embeddingHandler(deps: AppDeps) {
  return async function createEmbeddings(ctx: Context): Promise<void> {
    const body = ctx.state.body as EmbeddingRequest;
    const inference = requireInference(deps);
    const model = resolveModel(inference.registry, body.model, "embeddings");
    const input = typeof body.input === "string" ? [body.input] : body.input;
    const principal = principalOf(ctx);
    const completionId = newCompletionId("embd");
    const traceparent = currentTraceparent();
    // Admission: hold the worst-case cost on the monthly budget (429 / 402), released if the job never runs.
    const job = await admitWithHold(deps, { completionId, accountId: principal.accountId, work: { kind: "embeddings", input }, model }, () =>
      inference.gateway.start({
        completionId,
        endpoint: "embeddings",
        model: model.id,
        accountId: principal.accountId,
        keyId: principal.keyId,
        created: Math.floor(deps.clock.now().getTime() / 1000),
        ...(traceparent ? { traceparent } : {}),
        work: { kind: "embeddings", input },
      }),
    );
    ctx.res.on("close", () => {
      if (!ctx.res.writableFinished) job.release();
    });
    const collected = await collectEmbeddings(job).catch(nullIfReleased);
    if (!collected) return;
    const { embeddings, usage } = collected;
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
