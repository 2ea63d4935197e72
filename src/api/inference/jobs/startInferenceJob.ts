import type { Context } from "koa";
import type { CompletionJob, CompletionWork, Endpoint } from "../../../contracts/completionJob.ts";
import type { RegisteredModel } from "../../../models/modelRegistry.ts";
import type { AppDeps } from "../../appDeps.ts";
import { admitWithHold } from "../admission/admitWithHold.ts";
import { assertPromptFits } from "../admission/promptLengthLimit.ts";
import type { InferenceServices } from "../inferenceServices.ts";
import { principalOf } from "../../auth/principalOf.ts";
import { startEnqueueSpan, traceRelay } from "./traceJob.ts";
import type { AccessLogInference } from "../../http/accessLog.ts";
import type { RunningJob } from "./runningJob.ts";
import type { Lane } from "../../../contracts/lanes.ts";
import { ModelUnavailableError } from "../../http/errors.ts";
import { stateOf } from "../../http/requestState.ts";

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
  /**
   * The scheduling lane (default interactive): `background` for work nobody waits on right now,
   * `batch` for Batch API lines. A lower lane only gets a slot no higher lane's job waits for.
   */
  lane?: Lane;
  /** The request is admitted and queued (its hold placed): a stream may open its response. */
  onAdmitted?: () => void;
  /** Where the job stands in line once queued (by lane and fair-share rank), this one included. */
  onPosition?: (position: number) => void;
};

/**
 * The common path of every inference endpoint after validation: the per-tenant limits and fair-share
 * rank (TenantAdmission: 429 requests / tokens / concurrency / queue_share, one Redis script; OpenAI's
 * x-ratelimit-* headers), admission (hold the worst-case cost on the monthly budget: 429 / 402, released
 * if the job never runs) and the job on the model's queue, at its lane's and rank's priority,
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
  stateOf(ctx).inference = logged;
  const lane = spec.lane ?? "interactive";
  const startTimeoutMs = spec.stream || spec.patient ? inference.limits.jobStartTimeoutStreamMs : inference.limits.jobStartTimeoutMs;
  const tenant = await inference.tenants.admit(ctx, {
    completionId,
    accountId: principal.accountId,
    keyId: principal.keyId,
    rateLimits: principal.rateLimits,
    model: model.id,
    work,
    contextLength: model.context_length,
    lane,
    // A later prompt of a multi-prompt completion is part of the same request.
    countsAsRequest: !spec.patient,
    waitTtlMs: startTimeoutMs,
  });
  const target = { model: model.id, endpoint, completionId, lane };
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
    lane,
    priority: tenant.priority,
    work,
  };
  const admission = { pool: inference.holdPool, clock: deps.clock, policy: inference.speculation, metrics: deps.metrics };
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
    // Never started (or given up on): out of the account's in-flight counts, its tokens given back.
    void inference.tenants.release(tenant).catch(() => undefined);
    if (error instanceof ModelUnavailableError && error.code === "queue_full") deps.metrics.admission.refusals.inc({ reason: "queue_full" });
    throw error;
  });
  enqueue.end();
  return traceRelay(job, target, (usage) => {
    logged.inputTokens = usage.promptTokens;
    logged.outputTokens = usage.completionTokens;
    // The tokens counted at admission and not used go back to the window they were counted in.
    void inference.tenants.reconcile(tenant, usage.promptTokens + usage.completionTokens).catch(() => undefined);
  });
}

/** A non-streaming request whose client went away stops listening (the job runs on: see AbandonmentWatch). */
export function releaseOnDisconnect(ctx: Context, job: RunningJob): void {
  ctx.res.on("close", () => {
    if (!ctx.res.writableFinished) job.release();
  });
}
