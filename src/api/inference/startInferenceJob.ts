import type { Context } from "koa";
import type { CompletionJob, CompletionWork, Endpoint } from "../../contracts/completionJob.ts";
import type { RegisteredModel } from "../../models/modelRegistry.ts";
import type { AppDeps } from "../appDeps.ts";
import { admitWithHold } from "./admission/admitWithHold.ts";
import { assertPromptFits } from "./admission/promptLengthLimit.ts";
import type { InferenceServices } from "./inferenceServices.ts";
import { principalOf } from "./requireInference.ts";
import { startEnqueueSpan, traceRelay } from "./run/traceJob.ts";
import type { AccessLogInference } from "../http/accessLog.ts";
import type { RunningJob } from "./relay/runningJob.ts";

export type InferenceJobSpec = {
  model: RegisteredModel;
  endpoint: Endpoint;
  completionId: string;
  /** Unix seconds, the `created` of the response. */
  created: number;
  work: CompletionWork;
  /** A streamed request: it waits longer for a worker, and hears when it is admitted and where it stands in line. */
  stream: boolean;
  /**
   * Waits for a worker as long as a stream does, though it is not one: a later prompt of a multi-prompt
   * text completion, which queues behind the earlier prompts of the same request.
   */
  patient?: boolean;
  /** The request's stream_options.include_usage, kept for a resumed stream. */
  includeUsage?: boolean;
  /** The request is admitted and queued (its hold placed): a stream may open its response. */
  onAdmitted?: () => void;
  /** The number of jobs waiting for the model when this one was queued (this one included). */
  onPosition?: (position: number) => void;
};

/**
 * The common path of every inference endpoint after validation: admission (hold the worst-case cost on
 * the monthly budget: 429 / 402, released if the job never runs) and the job on the model's queue
 * carrying ids, the request and the trace context (never a secret); the job first and the hold right
 * after it when admitWithHold may speculate. Resolves once a worker started the job.
 */
export async function startInferenceJob(deps: AppDeps, inference: InferenceServices, ctx: Context, spec: InferenceJobSpec): Promise<RunningJob> {
  const { model, endpoint, work, completionId, created } = spec;
  assertPromptFits(endpoint, work, model.context_length);
  // Redis away: 503 before a budget hold is placed for a job that cannot be queued.
  inference.gateway.assertConnected();
  const principal = principalOf(ctx);
  const logged: AccessLogInference = { model: model.id };
  ctx.state.inference = logged;
  const target = { model: model.id, endpoint, completionId };
  const enqueue = startEnqueueSpan(target);
  const { traceparent } = enqueue;
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
  const admission = { pool: inference.holdPool, clock: deps.clock, policy: inference.speculation, metrics: deps.metrics };
  const startTimeoutMs = spec.stream || spec.patient ? inference.limits.jobStartTimeoutStreamMs : inference.limits.jobStartTimeoutMs;
  const reasoning = model.capabilities.reasoning;
  const job = await admitWithHold(
    admission,
    { completionId, accountId: principal.accountId, work, model },
    {
      start: (speculative, onQueued) =>
        inference.gateway.start(speculative ? { ...request, speculative } : request, {
          startTimeoutMs,
          reasoning,
          streamed: spec.stream,
          ...(spec.includeUsage ? { includeUsage: true } : {}),
          onQueued: () => {
            enqueue.end();
            onQueued?.();
          },
          ...(spec.onPosition ? { onPosition: spec.onPosition } : {}),
        }),
      cancel: () => inference.gateway.cancel(model.id, completionId),
      ...(spec.onAdmitted ? { admitted: spec.onAdmitted } : {}),
    },
  ).catch((error: unknown) => {
    enqueue.end(error);
    throw error;
  });
  enqueue.end();
  return traceRelay(job, target, (usage) => {
    logged.inputTokens = usage.promptTokens;
    logged.outputTokens = usage.completionTokens;
  });
}

/** A non-streaming request whose client went away stops listening (the job runs on: see AbandonmentWatch). */
export function releaseOnDisconnect(ctx: Context, job: RunningJob): void {
  ctx.res.on("close", () => {
    if (!ctx.res.writableFinished) job.release();
  });
}
