import type { Clock } from "../../../runtime/clock.ts";
import type { Pool } from "../../../db/createPool.ts";
import { ApiError, ModelUnavailableError, ServerShuttingDownError, ServiceUnavailableError } from "../../http/errors.ts";
import { budgetRefusalError } from "./budgetRefusalError.ts";
import { jobHoldMicroChf, smallestHoldMicroChf, type HoldableModel, type HoldableWork } from "./jobHoldMicroChf.ts";
import { placeHold, type PlaceHoldInput } from "../../../ledger/budget/placeHold.ts";
import { refuseHold } from "../../../ledger/budget/refuseHold.ts";
import { releaseHold } from "../../../ledger/budget/releaseHold.ts";
import { isDatabaseUnavailable } from "../../../db/databaseUnavailable.ts";
import type { SpeculationPolicy } from "./speculationPolicy.ts";
import { holdInDoubt, releaseHoldInDoubt } from "./releaseHoldInDoubt.ts";
import type { PlatformMetrics } from "../../../observability/metrics.ts";
import type { PlaceHoldResult } from "../../../ledger/budget/placeHold.ts";
import type { Lane } from "../../../contracts/lanes.ts";

export type AdmissionInput = { completionId: string; accountId: string; work: HoldableWork; model: HoldableModel; lane?: Lane };

export type AdmissionDeps = { pool: Pool; clock: Clock; policy: SpeculationPolicy; metrics: Pick<PlatformMetrics, "budget"> };

/** How admission drives the job: start it (enqueue, wait for a worker), or cancel it once enqueued. */
export type AdmittedStart<T extends { release(): void }> = {
  /** `onQueued` is called once Redis acknowledged the enqueue (before a worker started the job). */
  start(speculative: boolean, onQueued?: () => void): Promise<T>;
  /** Takes a speculatively started job off the queue, or has its worker abort it. */
  cancel(): Promise<void>;
  /**
   * Called once the job is queued and its hold placed, before a worker started it: from then on the
   * request is admitted and the client may be told (a stream opens its response).
   */
  admitted?(): void;
};

/**
 * Admission around an enqueue: holds the job's worst-case cost on the monthly budget (429
 * monthly_budget_exceeded or 402 when it does not fit) and starts the job. Nothing reaches the client
 * before the hold is placed. Two ways, chosen by the SpeculationPolicy:
 *
 * - careful: hold first, then start;
 * - speculative (the account's last hold left ample budget): enqueue first, hold once the job is
 *   queued, which takes the hold's database round trip off the way to the first token. If the hold is
 *   refused (or fails), the job is cancelled and its refusal recorded (by the hold statement itself, or
 *   after it failed), so the worker never charges it even if the cancel comes too late.
 *
 * When the start fails with model_unavailable, because Redis refused the enqueue (redis_unavailable),
 * because the job was cancelled while it waited in line, or taken off the queue by its API process's
 * shutdown, it never ran, so the hold is released at once
 * (were the job queued after all, by a command Redis ran just before its connection dropped, its settle
 * charges the actual cost all the same); after any other failure the job may still run and settle, and
 * the hold is left to its settle or to the sweeper. A hold statement whose connection was lost may have
 * committed unseen: no job is started for it (careful), or, speculative, the request is admitted after
 * all when PostgreSQL then says the hold is there, else its job is cancelled and refused; a hold placed
 * unseen of a request answered with an error is released in the background once PostgreSQL answers
 * again (releaseHoldInDoubt).
 */
export async function admitWithHold<T extends { release(): void }>(deps: AdmissionDeps, input: AdmissionInput, job: AdmittedStart<T>): Promise<T> {
  const now = deps.clock.now();
  const hold: PlaceHoldInput = {
    holdId: input.completionId,
    accountId: input.accountId,
    amountMicroChf: jobHoldMicroChf(input.work, input.model, input.lane),
    now,
  };
  // A batch line is always admitted carefully: a line refused for a budget held by requests in progress
  // is run again later under the same completion id, which a speculative refusal (its job queued and
  // cancelled, the id recorded as refused) would leave answered by that cancel and never charged. Nobody
  // waits for a line's first token.
  // The least a smaller request of this kind could cost: a refusal suggests one only when it would fit.
  const smallestMicroChf = smallestHoldMicroChf(input.work, input.model, input.lane);
  if (input.lane !== "batch" && deps.policy.maySpeculate(input.accountId, hold.amountMicroChf, now))
    return admitSpeculatively(deps, hold, job, smallestMicroChf);
  const placed = await placeHold(deps.pool, hold).catch((error: unknown) => {
    deps.policy.forget(input.accountId);
    // No job is started: a hold that was placed after all is released.
    if (holdInDoubt(error)) releaseInDoubt(deps, hold.holdId);
    throw error;
  });
  deps.policy.observe(input.accountId, placed, now);
  countHold(deps, placed, "careful");
  if (!placed.ok) throw budgetRefusalError(placed, { smallestMicroChf });
  try {
    return await job.start(false, () => job.admitted?.());
  } catch (error) {
    if (neverRan(error)) await releaseNeverRan(deps, input.completionId);
    throw error;
  }
}

/**
 * The job first, the hold as soon as Redis acknowledged the enqueue: the database round trip then runs
 * while a worker picks the job up and the engine works on the first token, instead of before them.
 * (Not later than that: a refusal must not wait for a free worker.) Nothing is sent to the client
 * before the hold is placed. A job whose hold is refused or fails is cancelled and never charged: its
 * refusal is recorded in refused_holds (by the hold statement itself, or after a failure by
 * refuseFailedHold), where the worker's settle looks before it charges, and the cancel tells its worker
 * (which, for a job that already finished, waits for the admission to be decided before it records).
 */
async function admitSpeculatively<T extends { release(): void }>(
  deps: AdmissionDeps,
  hold: PlaceHoldInput,
  job: AdmittedStart<T>,
  smallestMicroChf: number,
): Promise<T> {
  let queued!: () => void;
  const enqueued = new Promise<void>((resolve) => {
    queued = resolve;
  });
  const starting = job.start(true, () => queued());
  starting.catch(() => undefined);
  // A start that fails before its job was queued: nothing was held, nothing runs.
  await Promise.race([enqueued, starting]);
  const refusal = await placeSpeculativeHold(deps, hold, smallestMicroChf);
  if (refusal !== null) {
    await job.cancel().catch(() => undefined);
    void starting.then(
      (started) => started.release(),
      () => undefined,
    );
    throw refusal;
  }
  job.admitted?.();
  try {
    return await starting;
  } catch (error) {
    if (neverRan(error)) await releaseNeverRan(deps, hold.holdId);
    throw error;
  }
}

/**
 * The hold of a job already queued: null when it is placed (the request is admitted), or the error the
 * request is answered with, its refusal recorded. A refusal (429 / 402) is recorded by the hold
 * statement itself. A statement that failed (timed out, e.g. on the account's budget row locked, or lost
 * its connection) recorded nothing: the refusal is recorded now (refuseFailedHold), unless the hold
 * turns out to have been placed after all (its statement committed unseen), which admits the request.
 */
async function placeSpeculativeHold(deps: AdmissionDeps, hold: PlaceHoldInput, smallestMicroChf: number): Promise<unknown> {
  let placed: PlaceHoldResult;
  try {
    placed = await placeHold(deps.pool, { ...hold, speculative: true });
  } catch (error) {
    deps.policy.forget(hold.accountId);
    if ((await refuseFailedHold(deps, hold.holdId, holdInDoubt(error))) === "placed") {
      deps.metrics.budget.holdsPlaced.inc({ mode: "speculative" });
      return null;
    }
    return error;
  }
  deps.policy.observe(hold.accountId, placed, hold.now);
  countHold(deps, placed, "speculative");
  return placed.ok ? null : budgetRefusalError(placed, { smallestMicroChf });
}

/**
 * How long a request whose speculative hold failed waits for PostgreSQL to say whether the hold was
 * placed after all, before it is answered 503 all the same (a silent server must not hold the answer
 * up: the hold statement already waited for its own timeout).
 */
export const FAILED_HOLD_RESOLVE_MS = 300;

/** The pauses between the attempts to record a refusal in the background, the last repeated (ms). */
const BACKGROUND_REFUSAL_PAUSES_MS = [100, 200, 500, 1000] as const;

/**
 * Decides a speculative admission whose hold statement failed, its job already queued (and maybe
 * finished: its worker then waits for the admission to be decided before it records the usage):
 *
 * - "placed": the hold (or already the job's usage) is there, its statement having committed unseen
 *   (`inDoubt`: the connection was lost): the request is admitted after all, served and charged as any;
 * - "refused": the refusal is recorded (refuseHold) when neither is there, so the job is never charged,
 *   and the request is answered with the error. When PostgreSQL does not answer within
 *   FAILED_HOLD_RESOLVE_MS, the request is answered with the error all the same and the refusal is
 *   recorded in the background, whatever is found by then (the client was told the request failed),
 *   retried until PostgreSQL answers.
 *
 * A hold placed after all with its refusal recorded is released (its job is never charged), once the
 * refusal is there; were its statement still running on the server, it would commit after the refusal,
 * so in doubt the release is repeated (releaseHoldInDoubt). A job whose usage was recorded before the
 * refusal landed (its hold had committed, its worker saw it, and PostgreSQL did not answer the API within
 * FAILED_HOLD_RESOLVE_MS) is refunded whole: the refusal notes the reply undelivered (refuseHold), as the
 * client was answered with the error (the worker is told of the refusal through the cancel too, and
 * records nothing after it).
 */
async function refuseFailedHold(deps: AdmissionDeps, holdId: string, inDoubt: boolean): Promise<"placed" | "refused"> {
  const first = refuseHold(deps.pool, { holdId, now: deps.clock.now(), unlessPlaced: true });
  first.catch(() => undefined);
  const answer = await Promise.race([first.catch(() => null), new Promise<"late">((resolve) => setTimeout(resolve, FAILED_HOLD_RESOLVE_MS, "late").unref())]);
  if (answer !== null && answer !== "late") {
    if (!answer.refused) return "placed";
    if (inDoubt) releaseInDoubt(deps, holdId);
    return "refused";
  }
  // Answered with the error without knowing: the refusal is recorded whatever the first attempt finds.
  void first.then(
    (late) => {
      if (!late.refused) refuseInBackground(deps, holdId, inDoubt);
      else if (inDoubt) releaseInDoubt(deps, holdId);
    },
    () => refuseInBackground(deps, holdId, inDoubt),
  );
  return "refused";
}

/**
 * refuseHold whatever is there, in the background, again while PostgreSQL cannot be reached (an error
 * of another kind, or the pool ended, stops it); then, in doubt, the hold is released.
 */
function refuseInBackground(deps: AdmissionDeps, holdId: string, inDoubt: boolean, attempt = 0): void {
  const pause = BACKGROUND_REFUSAL_PAUSES_MS[Math.min(attempt, BACKGROUND_REFUSAL_PAUSES_MS.length - 1)]!;
  const timer = setTimeout(() => {
    refuseHold(deps.pool, { holdId, now: deps.clock.now(), unlessPlaced: false }).then(
      () => {
        if (inDoubt) releaseInDoubt(deps, holdId);
      },
      (error: unknown) => {
        if (isDatabaseUnavailable(error)) refuseInBackground(deps, holdId, inDoubt, attempt + 1);
      },
    );
  }, pause);
  timer.unref();
}

function countHold(deps: AdmissionDeps, placed: PlaceHoldResult, mode: "careful" | "speculative"): void {
  if (placed.ok) deps.metrics.budget.holdsPlaced.inc({ mode });
  else deps.metrics.budget.holdsRefused.inc({ status: placed.reason === "subscription_required" ? "402" : "429", reason: placed.reason });
}

/**
 * Releases the hold of a job that never ran (counted when a hold was there to release); when PostgreSQL
 * cannot be reached just then, again in the background (releaseHoldInDoubt).
 */
async function releaseNeverRan(deps: AdmissionDeps, holdId: string): Promise<void> {
  const released = await releaseHold(deps.pool, holdId).catch((error: unknown) => {
    if (isDatabaseUnavailable(error)) releaseInDoubt(deps, holdId);
    return null;
  });
  if (released !== null) deps.metrics.budget.holdsReleased.inc({ by: "admission" });
}

function releaseInDoubt(deps: AdmissionDeps, holdId: string): void {
  releaseHoldInDoubt(deps.pool, holdId, () => deps.metrics.budget.holdsReleased.inc({ by: "admission" }));
}

/** A start that failed this way left no job behind (see admitWithHold). */
function neverRan(error: unknown): boolean {
  return (
    error instanceof ModelUnavailableError ||
    (error instanceof ServiceUnavailableError && error.dependency === "redis") ||
    (error instanceof ApiError && error.code === "completion_cancelled") ||
    (error instanceof ServerShuttingDownError && error.neverRan)
  );
}
