import type { Context } from "koa";
import type { CompletionWork, Endpoint } from "../../../../contracts/completionJob.ts";
import { isTerminal } from "../../../../contracts/deltaMessage.ts";
import type { RegisteredModel } from "../../../../models/modelRegistry.ts";
import type { AppDeps } from "../../../appDeps.ts";
import { toApiError } from "../../../http/errorHandler.ts";
import { ConflictError, errorBody, InternalApiError, InvalidRequestError, ServerShuttingDownError } from "../../../http/errors.ts";
import type { CompletionRecord } from "../../jobs/completionRecords.ts";
import { newCompletionId } from "../../jobs/completionId.ts";
import { parseIdempotencyKey, requestHash } from "../../jobs/idempotencyKeys.ts";
import { failedUncharged } from "../../jobs/failedUncharged.ts";
import { chargedEarlier } from "../../jobs/chargedEarlier.ts";
import type { InferenceServices } from "./requireInference.ts";
import { principalOf } from "../../../auth/principalOf.ts";
import { setHeader } from "../../../http/responseHeaders.ts";
import { SseResponse } from "../../streaming/sseResponse.ts";
import { releaseOnDisconnect } from "../../jobs/releaseOnDisconnect.ts";
import { type CollectedReply, collectReply } from "../../jobs/collectReply.ts";
import { nullIfReleased, type RunningJob } from "../../jobs/runningJob.ts";
import { relayStream } from "../../streaming/relayStream.ts";
import type { JobHandle } from "../../jobs/completionJobs.ts";
import type { StreamFormat } from "../../streaming/streamFormat.ts";

const ignore = () => undefined;

/** The fields every response of a completion repeats. */
export type CompletionHead = { id: string; created: number; model: string; reasoning: boolean };

/** How an endpoint shapes its answers: the stream's chunks and the whole body. */
export type ResponseShape = {
  streamFormat(head: CompletionHead & { includeUsage: boolean }): StreamFormat;
  body(head: CompletionHead, collected: CollectedReply): unknown;
};

export type NewCompletion = {
  model: RegisteredModel;
  endpoint: Endpoint;
  idPrefix: Parameters<typeof newCompletionId>[0];
  work: CompletionWork;
  stream: boolean;
  includeUsage: boolean;
  shape: ResponseShape;
  /** The validated request body: with the endpoint, what an Idempotency-Key is bound to. */
  body: unknown;
};

/** The header that names a completion on every answer, so a client can resume it before its first chunk. */
export const COMPLETION_ID_HEADER = "x-completion-id";

/**
 * A new chat or text completion: admission, the job, then the answer (a stream or one body). With an
 * Idempotency-Key already used by this API key for the same body, the request attaches to that
 * completion instead (its stream from the start, or its result); with another body it is refused.
 * A stream gets its headers with its first chunk, or once it has been admitted for streamHeadersHoldMs
 * (then keep-alive comments while it waits for a worker), with a `: queued position=N` comment; a refusal
 * the worker finds before any output, within that hold, is an ordinary HTTP error (a 400), as OpenAI's.
 */
export async function serveNewCompletion(deps: AppDeps, inference: InferenceServices, ctx: Context, spec: NewCompletion): Promise<void> {
  const completionId = newCompletionId(spec.idPrefix);
  const claim = await claimIdempotencyKey(inference, ctx, spec.endpoint, spec.body, completionId);
  if (claim.existing) {
    // A retry is answered as the first request was: a cancelled or failed job is its error (409
    // completion_cancelled, ...), not the partial reply a GET shows.
    try {
      return await serveExistingCompletion(inference, ctx, claim.existing, {
        afterSeq: -1,
        stream: spec.stream,
        includeUsage: spec.includeUsage,
        shape: spec.shape,
        partialWhenEnded: false,
      });
    } catch (error) {
      // The first request ended, uncharged, for a passing reason while this retry waited on it (its API
      // process, shutting down, stopped it and answered 503 "Retry it"): this retry runs it anew, as one
      // sent a moment later would (it answered a final 409 completion_cancelled).
      if (!ctx.headerSent && (await claim.runAnew())) return serveNewCompletion(deps, inference, ctx, spec);
      throw error;
    }
  }
  const giveBack = claim.giveBack;
  const created = Math.floor(deps.clock.now().getTime() / 1000);
  const head: CompletionHead = { id: completionId, created, model: spec.model.id, reasoning: spec.model.capabilities.reasoning };
  const jobSpec = { model: spec.model, endpoint: spec.endpoint, completionId, created, work: spec.work };
  setHeader(ctx, COMPLETION_ID_HEADER, completionId);
  if (!spec.stream) {
    const starting = inference.jobs.start(ctx, { ...jobSpec, stream: false });
    const job = await starting.started.catch(async (error: unknown) => {
      await giveBack();
      await forgetIdIfNeverAdmitted(ctx, starting);
      throw error;
    });
    await collectInto(ctx, job, head, spec.shape);
    return;
  }
  let job: RunningJob | undefined;
  // A client that goes while its job waits in line starts the job's grace period then (not at its start).
  let leave = (): void => undefined;
  const clientLeft = new Promise<void>((resolve) => {
    leave = resolve;
  });
  const sse = new SseResponse(ctx, () => (job ? job.release() : leave()), { keepAliveMs: inference.limits.sseKeepAliveMs });
  const starting = inference.jobs.start(ctx, { ...jobSpec, stream: true, includeUsage: spec.includeUsage, tellPosition: true, clientLeft });
  // Admitted: the headers go out with the first chunk, or once the hold has passed without one (a job
  // waiting in line, a long prompt being read), so that a refusal found at the start is still a 400.
  let hold: NodeJS.Timeout | undefined;
  starting.admitted.then(() => {
    const holdMs = inference.limits.streamHeadersHoldMs;
    if (holdMs <= 0) return sse.open();
    hold = setTimeout(() => sse.open(), holdMs);
  }, ignore);
  starting.queued.then((position) => {
    // The expected wait (ms), once this process has seen jobs of the model start: `queued position=N wait_ms=W`.
    const waitMs = inference.jobs.expectedWaitMs(spec.model.id, position);
    sse.commentOnceOpen(`queued position=${position}${waitMs === undefined ? "" : ` wait_ms=${waitMs}`}`);
  }, ignore);
  try {
    try {
      job = await starting.started;
    } catch (error) {
      await giveBack();
      if (!sse.opened) {
        await forgetIdIfNeverAdmitted(ctx, starting);
        throw error;
      }
      // This process stops (its notice): an event without an id, as after output.
      if (error instanceof ServerShuttingDownError) sse.unnamedJson(JSON.stringify(errorBody(error)));
      else sse.event(0, errorBody(toApiError(error)));
      sse.done();
      return;
    }
    if (sse.clientGone) {
      job.release();
      return;
    }
    await relayStream(job, sse, spec.shape.streamFormat({ ...head, includeUsage: spec.includeUsage }), spec.includeUsage);
  } finally {
    clearTimeout(hold);
  }
}

/** A request refused before admission (a rate limit, the budget, a full queue) never was a completion: its answer names none. */
async function forgetIdIfNeverAdmitted(ctx: Context, starting: JobHandle): Promise<void> {
  const admitted = await starting.admitted.then(
    () => true,
    () => false,
  );
  if (!admitted) ctx.remove(COMPLETION_ID_HEADER);
}

/**
 * The request's Idempotency-Key, claimed for `completionId`: `existing` is the completion of an earlier
 * request with the same key and body (waited for while that request is still being admitted; this one
 * then attaches to it instead of running and charging again), null when this one runs (it won the claim,
 * sent no key, or the earlier request failed and gave its claim back). The same key with another body is
 * a 400. `giveBack` releases this request's claim (its job was never queued).
 */
export async function claimIdempotencyKey(
  inference: InferenceServices,
  ctx: Context,
  endpoint: Endpoint,
  body: unknown,
  completionId: string,
): Promise<{ existing: CompletionRecord | null; giveBack: () => Promise<void>; runAnew: () => Promise<boolean> }> {
  const principal = principalOf(ctx);
  const idempotencyKey = parseIdempotencyKey(ctx.get("idempotency-key") || undefined);
  const never = async () => false;
  if (!idempotencyKey) return { existing: null, giveBack: async () => undefined, runAnew: never };
  const hash = requestHash(endpoint, body);
  for (;;) {
    const claim = await inference.idempotency.claim(principal.keyId, idempotencyKey, hash, completionId);
    if (claim.won) {
      return {
        existing: null,
        giveBack: () => inference.idempotency.release(principal.keyId, idempotencyKey, completionId).catch(() => undefined),
        runAnew: never,
      };
    }
    if (claim.bodyHash !== hash) {
      throw new InvalidRequestError("This Idempotency-Key was already used with a different request.", {
        param: "Idempotency-Key",
        code: "idempotency_key_reused",
      });
    }
    const record = await recordOfClaim(inference, claim.completionId, () =>
      inference.idempotency.stillClaimed(principal.keyId, idempotencyKey, claim.completionId),
    );
    // Null: the first request failed and gave its claim back: this one claims again.
    if (!record) continue;
    // A completion that failed for a passing reason (the model unavailable, an engine failure) and was
    // charged nothing: the retry its 503 / 500 asked for runs anew (it replayed that error forever).
    const runAnew = async (): Promise<boolean> => {
      const last = await inference.records.lastMessage(record.completionId).catch(() => undefined);
      if (!last || !failedUncharged(last)) return false;
      await inference.idempotency.release(principal.keyId, idempotencyKey, record.completionId);
      return true;
    };
    if (await runAnew()) continue;
    // `runAnew`: the same once this request, attached to it, saw it end so.
    return { existing: record, giveBack: async () => undefined, runAnew };
  }
}

/**
 * The running job of an existing completion of the caller's account, followed from after `afterSeq`: its
 * place among the account's open follows first (a 429 counts no listener), then it listens; its release
 * before the last message counts as the client going away.
 */
export async function followExistingCompletion(inference: InferenceServices, ctx: Context, record: CompletionRecord, afterSeq: number): Promise<RunningJob> {
  ctx.set(COMPLETION_ID_HEADER, record.completionId);
  // Gapless: a reply whose messages after `afterSeq` begin later (lost with Redis, restarted without its
  // data) ends the read with a 503 rather than passing for the whole reply or the exact rest.
  const followed = inference.followForClient(principalOf(ctx).accountId, record.completionId, afterSeq, { gapless: true });
  try {
    await inference.records.attach(record.completionId);
  } catch (error) {
    followed.release();
    throw error;
  }
  // Held while it reads: written again should Redis lose it meanwhile (FollowedRecords).
  return listening(followed, () => inference.abandonment.detached(record), inference.followedRecords.hold(record));
}

/**
 * An existing completion of the caller's account, from its replay stream: streamed from after `afterSeq`
 * and then live (a resume with Last-Event-ID / starting_after, or an attach), or its whole result once it
 * ends (GET, or a non-streamed attach). The client counts as listening while it reads. A non-streamed
 * answer of a cancelled or failed job is its partial reply (`x-completion-status`), unless
 * `partialWhenEnded` is false (a retry with an Idempotency-Key: the first request's error).
 */
export async function serveExistingCompletion(
  inference: InferenceServices,
  ctx: Context,
  record: CompletionRecord,
  options: { afterSeq: number; stream: boolean; includeUsage: boolean; shape: ResponseShape; partialWhenEnded?: boolean },
): Promise<void> {
  const job = await followExistingCompletion(inference, ctx, record, options.afterSeq);
  const head: CompletionHead = { id: record.completionId, created: record.created, model: record.model, reasoning: record.reasoning };
  if (!options.stream) {
    await collectInto(ctx, job, head, options.shape, { partialWhenEnded: options.partialWhenEnded ?? true });
    return;
  }
  const sse = new SseResponse(ctx, () => job.release(), { keepAliveMs: inference.limits.sseKeepAliveMs });
  sse.open();
  // Resumed after the first chunk (seq 0 is `started`, 1 the first chunk): the role is not repeated.
  await relayStream(job, sse, options.shape.streamFormat({ ...head, includeUsage: options.includeUsage }), options.includeUsage, {
    firstSent: options.afterSeq >= 1,
    afterSeq: options.afterSeq,
  });
}

/** The header that marks a stored completion's answer as the partial reply of a cancelled job. */
export const COMPLETION_STATUS_HEADER = "x-completion-status";

async function collectInto(
  ctx: Context,
  job: RunningJob,
  head: CompletionHead,
  shape: ResponseShape,
  options: { partialWhenEnded?: boolean } = {},
): Promise<void> {
  releaseOnDisconnect(ctx, job);
  const collected = await collectReply(job, options).catch(nullIfReleased);
  if (collected) {
    ctx.set("cache-control", "no-store");
    if (collected.ended) ctx.set(COMPLETION_STATUS_HEADER, collected.ended);
    ctx.body = shape.body(head, collected);
  }
}

/** A job whose release before its last message counts as a client going away (`onEarlyRelease`); `unhold` once released. */
function listening(job: RunningJob, onEarlyRelease: () => void, unhold: () => void): RunningJob {
  let ended = false;
  let released = false;
  return {
    completionId: job.completionId,
    async next() {
      const message = await job.next();
      if (isTerminal(message)) ended = true;
      return message;
    },
    release() {
      if (released) return;
      released = true;
      job.release();
      unhold();
      if (!ended) onEarlyRelease();
    },
  };
}

/**
 * The record of the completion an Idempotency-Key names, waiting while the first request is still being
 * admitted; null once that request gave its claim back (it failed before its job was queued).
 */
async function recordOfClaim(inference: InferenceServices, completionId: string, stillClaimed: () => Promise<boolean>): Promise<CompletionRecord | null> {
  for (let waited = 0; ; waited += 50) {
    const record = await inference.records.find(completionId);
    if (record) return record;
    if (!(await stillClaimed())) return null;
    // No record, yet the claim lasts: still being admitted, or it ended and its record expired
    // (COMPLETION_RETENTION_S shorter than IDEMPOTENCY_TTL_S), which its charge in the log tells. Such a
    // retry waited out the start timeout (10 minutes), then a 500, again at every retry.
    if (waited % 1000 === 0 && (await chargedEarlier(inference.holdPool, completionId))) {
      throw new ConflictError(
        "The completion of the request with this Idempotency-Key has expired (it is kept COMPLETION_RETENTION_S), so it cannot be answered again. Send another Idempotency-Key to run the request again.",
        { code: "idempotency_completion_gone", final: true },
      );
    }
    if (waited > inference.limits.jobStartTimeoutStreamMs) throw new InternalApiError("The first request with this Idempotency-Key did not start.");
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
