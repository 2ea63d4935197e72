import type { Context } from "koa";
import type { CompletionJob, CompletionWork, Endpoint } from "../../../contracts/completionJob.ts";
import type { Lane } from "../../../contracts/lanes.ts";
import type { RegisteredModel } from "../../../models/modelRegistry.ts";
import type { PlatformMetrics } from "../../../observability/metrics.ts";
import { principalOf } from "../../auth/principalOf.ts";
import type { Principal } from "../../http/requestState.ts";
import type { AccessLogInference } from "../../http/accessLog.ts";
import { ModelUnavailableError } from "../../http/errors.ts";
import { stateOf } from "../../http/requestState.ts";
import { responseHeaders } from "../../http/responseHeaders.ts";
import { type AdmissionDeps, admitWithHold } from "../admission/admitWithHold.ts";
import { assertPromptFits } from "../admission/promptLengthLimit.ts";
import type { HeaderSink, TenantAdmission } from "../admission/tenantAdmission.ts";
import type { InferenceGateway } from "./inferenceGateway.ts";
import { QueueWaitEstimate } from "./queueWaitEstimate.ts";
import type { RunningJob } from "./runningJob.ts";
import { startEnqueueSpan, traceRelay } from "./traceJob.ts";

export type InferenceJobSpec = {
  model: RegisteredModel;
  endpoint: Endpoint;
  completionId: string;
  /** Unix seconds, the `created` of the response. */
  created: number;
  work: CompletionWork;
  /** A streamed request: it waits longer for a worker. */
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
  /** Reads the job's place in line once it is queued (the `queued` stage): a stream that tells its client. */
  tellPosition?: boolean;
  /** Not started within the start timeout: left in line, and `started` rejects with StillQueuedError (InferenceGateway). */
  keepQueued?: boolean;
  /** Settles when the client goes before the job started (a stream's): its grace period starts then (StartOptions). */
  clientLeft?: Promise<void>;
  /**
   * Its budget hold (keyed by the completion id) is placed already: a Batch API line run again under the
   * same completion id after its job was lost. No second hold is placed (it could not be: one per id);
   * the one there is settled by the run that records the usage, once.
   */
  holdPlaced?: boolean;
  /** How long the job's replay stream is kept after its end (CompletionJob; absent: the retention). */
  replayKeptAfterEndS?: number;
};

/**
 * Who a job runs for: the principal, where the rate-limit headers go, and the access log's figures. An
 * HTTP request is one (callerOf); a Batch API line is one without a request of its own.
 */
export type JobCaller = { principal: Principal; headers: HeaderSink; logged: AccessLogInference };

/** The caller of an inference request: its principal, its response headers, its access-log entry. */
export function callerOf(ctx: Context, model: RegisteredModel): JobCaller {
  const logged: AccessLogInference = { model: model.id };
  stateOf(ctx).inference = logged;
  return { principal: principalOf(ctx), headers: responseHeaders(ctx), logged };
}

/**
 * A job being started, by stage: admitted -> queued (its place in line) -> started (its messages).
 * Every stage settles at most once, in this order; a request refused or failed before admission rejects
 * `admitted` and `started` with the same error (still an ordinary HTTP error: nothing was sent).
 */
export type JobHandle = {
  readonly completionId: string;
  /**
   * The request is admitted: its job queued and its budget hold placed, before a worker started it. From
   * then on the client may be told (a stream opens its response).
   */
  readonly admitted: Promise<void>;
  /**
   * Where the job stands in line once admitted (by lane and fair-share rank), this one included. Only
   * with `tellPosition`, and only when the waiting count could be read; otherwise it never settles.
   */
  readonly queued: Promise<number>;
  /** A worker started the job: its messages. Rejects with the reason it did not start. */
  readonly started: Promise<RunningJob>;
};

export type CompletionJobsDeps = {
  gateway: InferenceGateway;
  /** Rate limits, queue share and fair-share rank of each request (before its budget hold). */
  tenants: TenantAdmission;
  /** Budget holds: the pool, clock, speculation policy and metrics of admitWithHold. */
  admission: AdmissionDeps;
  metrics: Pick<PlatformMetrics, "admission">;
  limits: { jobStartTimeoutMs: number; jobStartTimeoutStreamMs: number };
};

const ignore = () => undefined;

/**
 * The one way every inference endpoint starts a job after validation: the per-tenant limits and
 * fair-share rank (TenantAdmission: 429 requests / tokens / concurrency / queue_share, one Redis script;
 * OpenAI's x-ratelimit-* headers), admission (hold the worst-case cost on the monthly budget: 429 / 402,
 * released if the job never runs) and the job on the model's queue, at its lane's and rank's priority,
 * carrying ids, the request and the trace context (never a secret); the job first and the hold right
 * after it when admitWithHold may speculate.
 */
export class CompletionJobs {
  readonly #deps: CompletionJobsDeps;
  readonly #waits = new QueueWaitEstimate();

  constructor(deps: CompletionJobsDeps) {
    this.#deps = deps;
  }

  /** The expected wait of a job of `model` queued at `position` (ms), from the jobs this process saw start. */
  expectedWaitMs(model: string, position: number): number | undefined {
    return this.#waits.expectedMs(model, position);
  }

  /** Starts the job of an inference request; its handle tells each stage as it is reached (see JobHandle). */
  start(ctx: Context, spec: InferenceJobSpec): JobHandle {
    return this.startFor(callerOf(ctx, spec.model), spec);
  }

  /** The same for a caller that is not an HTTP request (the batch dispatcher). */
  startFor(caller: JobCaller, spec: InferenceJobSpec): JobHandle {
    let admit!: () => void;
    let refuse!: (error: unknown) => void;
    const admitted = new Promise<void>((resolve, reject) => {
      admit = resolve;
      refuse = reject;
    });
    let place!: (position: number) => void;
    const placed = new Promise<number>((resolve) => {
      place = resolve;
    });
    // The place in line is told once the request is admitted (a speculative job may hear it before).
    const queued = Promise.all([admitted, placed]).then(([, position]) => position);
    const started = this.#start(caller, spec, admit, spec.tellPosition ? place : undefined);
    // How long a job waited for each place ahead of it: the expected wait of the next ones.
    const placedAt = placed.then((position) => ({ position, at: Date.now() }));
    Promise.all([placedAt, started]).then(([{ position, at }]) => this.#waits.observe(spec.model.id, position, Date.now() - at), ignore);
    // A failure before admission is admission's too (a reject after admit() changes nothing).
    started.catch(refuse);
    admitted.catch(ignore);
    queued.catch(ignore);
    return { completionId: spec.completionId, admitted, queued, started };
  }

  async #start(caller: JobCaller, spec: InferenceJobSpec, admitted: () => void, position: ((position: number) => void) | undefined): Promise<RunningJob> {
    const { gateway, tenants, admission, metrics, limits } = this.#deps;
    const { model, endpoint, work, completionId, created } = spec;
    assertPromptFits(endpoint, work, model.context_length);
    // Redis away: 503 before a budget hold is placed for a job that cannot be queued.
    gateway.assertConnected();
    const { principal, logged } = caller;
    const lane = spec.lane ?? "interactive";
    const startTimeoutMs = spec.stream || spec.patient ? limits.jobStartTimeoutStreamMs : limits.jobStartTimeoutMs;
    const tenant = await tenants.admit(caller.headers, {
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
      streamed: spec.stream,
      ...(spec.replayKeptAfterEndS === undefined ? {} : { replayKeptAfterEndS: spec.replayKeptAfterEndS }),
      priority: tenant.priority,
      // Charged at the prices its hold is placed at, whatever registry its worker has.
      pricing: {
        version: model.priceTableVersion,
        inputMicroChfPerMillion: model.inputMicroChfPerMillion,
        outputMicroChfPerMillion: model.outputMicroChfPerMillion,
        batchDiscountBps: model.batchDiscountBps,
      },
      // What its worker gives back of them at its end: the tokens it did not use (one call, the worker's).
      countedTokens: tenant.counted,
      work,
    };
    const reasoning = model.capabilities.reasoning;
    const start = (speculative: boolean, onQueued?: () => void) =>
      gateway.start(speculative ? { ...request, speculative } : request, {
        startTimeoutMs,
        reasoning,
        streamed: spec.stream,
        accountWaiting: tenant.accountWaiting,
        ...(spec.includeUsage ? { includeUsage: true } : {}),
        onQueued: () => {
          enqueue.end();
          onQueued?.();
        },
        ...(position ? { onPosition: position } : {}),
        ...(spec.keepQueued ? { keepQueued: true } : {}),
        ...(spec.clientLeft ? { clientLeft: spec.clientLeft } : {}),
      });
    const starting = spec.holdPlaced
      ? start(false, admitted)
      : admitWithHold(
          admission,
          { completionId, accountId: principal.accountId, work, model, lane },
          { start, cancel: () => gateway.cancel(model.id, completionId), admitted },
        );
    const job = await starting.catch((error: unknown) => {
      enqueue.end(error);
      // Never started (or given up on): out of the account's in-flight counts, its tokens given back.
      void tenants.release(tenant);
      if (error instanceof ModelUnavailableError && error.code === "queue_full") metrics.admission.refusals.inc({ reason: "queue_full" });
      throw error;
    });
    enqueue.end();
    return traceRelay(job, target, (usage) => {
      logged.inputTokens = usage.promptTokens;
      logged.outputTokens = usage.completionTokens;
    });
  }
}
