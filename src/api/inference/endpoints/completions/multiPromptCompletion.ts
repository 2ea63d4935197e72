import type { Context } from "koa";
import type { EngineChatRequest } from "../../../../contracts/engineRequestSchemas.ts";
import type { RegisteredModel } from "../../../../models/modelRegistry.ts";
import type { AppDeps } from "../../../appDeps.ts";
import { newCompletionId } from "../../jobs/completionId.ts";
import type { InferenceServices } from "../shared/requireInference.ts";
import { JobReleasedError, type RunningJob } from "../../jobs/runningJob.ts";
import { firstFailure } from "../../../../runtime/firstFailure.ts";
import { collectReply, type CollectedReply } from "../../jobs/collectReply.ts";
import { COMPLETION_ID_HEADER } from "../shared/serveCompletion.ts";
import { releaseOnDisconnect } from "../../jobs/releaseOnDisconnect.ts";
import { multiPromptCompletionBody } from "./completionFormat.ts";
import { assertPromptFits } from "../../admission/promptLengthLimit.ts";
import { ApiError } from "../../../http/errors.ts";
import { principalOf } from "../../../auth/principalOf.ts";
import { releaseHolds } from "../../../../ledger/budget/releaseHold.ts";
import { budgetRefusalError } from "../../admission/budgetRefusalError.ts";
import { placeHolds } from "../../../../ledger/budget/placeHolds.ts";
import { jobHoldMicroChf, smallestHoldMicroChf } from "../../admission/jobHoldMicroChf.ts";

/**
 * A non-streamed text completion of several prompts (OpenAI semantics: one choice per prompt, `index`
 * the prompt's position, usage summed). Each prompt is its own job and completion, with its own budget
 * hold and usage record (so each is charged exactly once, for what it generated); the answer carries the
 * first one's id. The prompts after the first wait for a worker as long as a stream does (they queue
 * behind the earlier ones of the same request). If any job cannot start or fails, the request fails with
 * that error and the others are stopped as refused: nobody receives their replies, so what they generated
 * is not charged (their holds are released). A prompt that had already finished was charged: the error
 * names those completions, which GET /v1/completions/{id} answers.
 */
export async function serveMultiPromptCompletion(
  deps: AppDeps,
  inference: InferenceServices,
  ctx: Context,
  spec: { model: RegisteredModel; requests: EngineChatRequest[] },
): Promise<void> {
  const { model } = spec;
  // Every prompt that is too long is refused before any of them starts: a 400 never follows a charge.
  for (const request of spec.requests) assertPromptFits("completions", { kind: "chat", request }, model.context_length);
  // Prompts that together can never pass the limits: one 429 that says not to retry, before any of them is counted.
  inference.tenants.assertCanEverPass({
    rateLimits: principalOf(ctx).rateLimits,
    works: spec.requests.map((request) => ({ kind: "chat", request })),
    contextLength: model.context_length,
  });
  const created = Math.floor(deps.clock.now().getTime() / 1000);
  const ids = spec.requests.map(() => newCompletionId("cmpl"));
  // Every prompt's budget hold before any prompt starts: a request the budget cannot take whole is refused
  // before anything runs (a prompt started, then stopped by another's refusal, could finish first and be
  // charged for a reply its client never got).
  await holdEveryPrompt(deps, principalOf(ctx).accountId, model, spec.requests, ids);
  ctx.set(COMPLETION_ID_HEADER, ids[0]!);
  // Stops the jobs not finished as refused (their workers record nothing) and releases their holds.
  // Their records go too (a GET of such an id is a 404: it was never answered), and so does the header
  // naming the first prompt's completion unless that one was answered (the error names those that were).
  const refuseUnfinished = async (jobs: readonly (RunningJob | null)[], finished: ReadonlySet<number> = new Set()) => {
    const unfinished = ids.filter((_id, index) => !finished.has(index));
    if (!finished.has(0)) ctx.remove(COMPLETION_ID_HEADER);
    await Promise.all(
      jobs.map(async (job, index) => {
        job?.release();
        if (finished.has(index)) return;
        // Its start, if still waiting for a worker, ends now (its feed closed) and gives back what it
        // counted against the account's limits: a prompt taken off the queue waited for its start
        // timeout (10 minutes), its account's concurrency held all that time.
        await inference.gateway.cancel(model.id, ids[index]!).catch(() => undefined);
      }),
    );
    await releaseHolds(deps.pool, unfinished).catch(() => undefined);
  };

  const startPrompt = (index: number) =>
    inference.jobs.start(ctx, {
      model,
      endpoint: "completions",
      completionId: ids[index]!,
      created,
      work: { kind: "chat", request: spec.requests[index]! },
      stream: false,
      patient: index > 0,
      holdPlaced: true,
    });
  // The later prompts first: they count no request in the per-minute window. The first prompt, which
  // counts the request, once they were all admitted: a request refused for a limit at any of its prompts
  // counts nothing (the first prompt's count stayed, and refused requests used up the window).
  const later = spec.requests.slice(1).map((_request, index) => startPrompt(index + 1));
  const laterRefused = await firstFailure(later.map((handle) => handle.admitted));
  const first = laterRefused ? Promise.reject(laterRefused.reason) : startPrompt(0).started;
  first.catch(() => undefined);
  const starts = [first, ...later.map((handle) => handle.started)];
  const jobs: (RunningJob | null)[] = starts.map(() => null);
  // The first prompt refused answers the request at once (a full queue's 503 waited for the other
  // prompts' jobs to start, one of them queued meanwhile); those still starting are stopped by their ids.
  const refused = await firstFailure(
    starts.map((start, index) =>
      start.then((job) => {
        jobs[index] = job;
      }),
    ),
  );
  if (refused) {
    for (const [index, start] of starts.entries())
      if (!jobs[index])
        start.then(
          (job) => job.release(),
          () => undefined,
        );
    await refuseUnfinished(jobs);
    throw refused.reason;
  }
  releaseOnDisconnect(ctx, ...(jobs as RunningJob[]));
  const collected = await Promise.allSettled(jobs.map((job) => collectReply(job!)));
  const failed = collected.find((result) => result.status === "rejected");
  if (failed) {
    // The client went away: not a cancel (the jobs run on; abandonment stops them after the grace period).
    if (failed.reason instanceof JobReleasedError) return;
    const finished = new Set(collected.flatMap((result, index) => (result.status === "fulfilled" ? [index] : [])));
    await refuseUnfinished(jobs, finished);
    throw withFinishedNamed(
      failed.reason,
      [...finished].map((index) => ids[index]!),
    );
  }
  const replies = collected.map((result) => (result as PromiseFulfilledResult<CollectedReply>).value);
  ctx.set("cache-control", "no-store");
  ctx.body = multiPromptCompletionBody({ id: ids[0]!, created, model: model.id }, replies);
}

/** The request's error, naming the completions of its prompts that had finished (and were charged) before it failed. */
function withFinishedNamed(error: unknown, finished: string[]): unknown {
  if (finished.length === 0 || !(error instanceof ApiError)) return error;
  return new ApiError(
    error.status,
    error.type,
    `${/[.!?]$/.test(error.message) ? error.message : `${error.message}.`} The prompts answered before this one were charged; read them with GET /v1/completions/{id}: ${finished.join(", ")}.`,
    { code: error.code, param: error.param, headers: error.headers },
  );
}

/**
 * Places the hold of each prompt (careful admission: before its job is queued), all or none, in one
 * statement (placeHolds); a refusal answers the request as a whole (its own holds counted as its own, not
 * as other requests' in progress: when only they are in the way, retrying cannot help).
 */
async function holdEveryPrompt(
  deps: AppDeps,
  accountId: string,
  model: RegisteredModel,
  requests: readonly EngineChatRequest[],
  ids: readonly string[],
): Promise<void> {
  const holds = requests.map((request, index) => ({ holdId: ids[index]!, amountMicroChf: jobHoldMicroChf({ kind: "chat", request }, model) }));
  const smallest = Math.min(...requests.map((request) => smallestHoldMicroChf({ kind: "chat", request }, model)));
  const placed = await placeHolds(deps.pool, { accountId, holds, now: deps.clock.now() }).catch(async (error: unknown) => {
    // A statement whose answer was lost may still have placed them.
    await releaseHolds(deps.pool, ids).catch(() => undefined);
    throw error;
  });
  if (placed.ok) return;
  // Refused together: told as the request's prompts together (its largest prompt's hold, their sum).
  const largest = Math.max(...holds.map((hold) => hold.amountMicroChf));
  throw budgetRefusalError({ ...placed, amountMicroChf: largest }, { ownHoldsMicroChf: placed.amountMicroChf, ownHeldMicroChf: 0, smallestMicroChf: smallest });
}
