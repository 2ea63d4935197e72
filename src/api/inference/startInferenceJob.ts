import type { Context } from "koa";
import type { AppDeps } from "../appDeps.ts";
import type { CompletionJob, CompletionWork, Endpoint } from "../../contracts/completionJob.ts";
import type { RegisteredModel } from "../../models/modelRegistry.ts";
import { admitWithHold } from "./admission/admitWithHold.ts";
import { newCompletionId } from "./completionId.ts";
import type { InferenceServices } from "./inferenceServices.ts";
import { principalOf } from "./requireInference.ts";
import { currentTraceparent } from "./run/currentTraceparent.ts";
import type { RunningJob } from "./run/inferenceGateway.ts";

export type StartedInferenceJob = { job: RunningJob; completionId: string; created: number };

/**
 * The common path of every inference endpoint after validation: a completion id, admission (hold the
 * worst-case cost on the monthly budget: 429 / 402, released if the job never runs) and the job on the
 * model's queue carrying ids, the request and the trace context (never a secret); the job first and
 * the hold right after it when admitWithHold may speculate.
 */
export async function startInferenceJob(
  deps: AppDeps,
  inference: InferenceServices,
  ctx: Context,
  options: { model: RegisteredModel; endpoint: Endpoint; idPrefix: Parameters<typeof newCompletionId>[0]; work: CompletionWork },
): Promise<StartedInferenceJob> {
  const { model, endpoint, work } = options;
  // Redis away: 503 before a budget hold is placed for a job that cannot be queued.
  inference.gateway.assertConnected();
  const principal = principalOf(ctx);
  const completionId = newCompletionId(options.idPrefix);
  const created = Math.floor(deps.clock.now().getTime() / 1000);
  const traceparent = currentTraceparent();
  const request: Omit<CompletionJob, "replyTo"> = {
    completionId,
    endpoint,
    model: model.id,
    accountId: principal.accountId,
    keyId: principal.keyId,
    created,
    ...(traceparent ? { traceparent } : {}),
    work,
  };
  const admission = { pool: inference.holdPool, clock: deps.clock, policy: inference.speculation };
  const job = await admitWithHold(
    admission,
    { completionId, accountId: principal.accountId, work, model },
    {
      start: (speculative, onQueued) => inference.gateway.start(speculative ? { ...request, speculative } : request, onQueued),
      cancel: () => inference.gateway.cancel(model.id, completionId),
    },
  );
  return { job, completionId, created };
}

/** A non-streaming request whose client went away stops listening (the job itself finishes and is charged). */
export function releaseOnDisconnect(ctx: Context, job: RunningJob): void {
  ctx.res.on("close", () => {
    if (!ctx.res.writableFinished) job.release();
  });
}
