import type { Clock } from "../../../runtime/clock.ts";
import type { Pool } from "../../../db/createPool.ts";
import { ApiError, ModelUnavailableError, ServiceUnavailableError } from "../../http/errors.ts";
import { budgetRefusalError } from "./budgetRefusalError.ts";
import { jobHoldMicroChf, type HoldableModel, type HoldableWork } from "./jobHoldMicroChf.ts";
import { placeHold, type PlaceHoldInput } from "../../../ledger/budget/placeHold.ts";
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
 *   refused (or fails), the job is cancelled; the refusal is recorded by the hold statement itself, so
 *   the worker never charges it even if the cancel comes too late.
 *
 * When the start fails with model_unavailable, because Redis refused the enqueue (redis_unavailable), or
 * because the job was cancelled while it waited in line, it never ran, so the hold is released at once
 * (were the job queued after all, by a command Redis ran just before its connection dropped, its settle
 * charges the actual cost all the same); after any other failure the job may still run and settle, and
 * the hold is left to its settle or to the sweeper. A hold statement whose connection was lost may have
 * committed unseen: no job is started for it (or the job is cancelled), and the hold is released in the
 * background once PostgreSQL answers again (releaseHoldInDoubt).
 */
export async function admitWithHold<T extends { release(): void }>(deps: AdmissionDeps, input: AdmissionInput, job: AdmittedStart<T>): Promise<T> {
  const now = deps.clock.now();
  const hold: PlaceHoldInput = {
    holdId: input.completionId,
    accountId: input.accountId,
    amountMicroChf: jobHoldMicroChf(input.work, input.model, input.lane),
    now,
  };
  if (deps.policy.maySpeculate(input.accountId, hold.amountMicroChf, now)) return admitSpeculatively(deps, hold, job);
  const placed = await placeHold(deps.pool, hold).catch((error: unknown) => {
    deps.policy.forget(input.accountId);
    // No job is started: a hold that was placed after all is released.
    if (holdInDoubt(error)) releaseInDoubt(deps, hold.holdId);
    throw error;
  });
  deps.policy.observe(input.accountId, placed, now);
  countHold(deps, placed, "careful");
  if (!placed.ok) throw budgetRefusalError(placed);
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
 * before the hold is placed. A job whose hold is refused or fails is cancelled (never charged: the
 * refusal is recorded with the hold statement, and a cancelled job records no usage).
 */
async function admitSpeculatively<T extends { release(): void }>(deps: AdmissionDeps, hold: PlaceHoldInput, job: AdmittedStart<T>): Promise<T> {
  let queued!: () => void;
  const enqueued = new Promise<void>((resolve) => {
    queued = resolve;
  });
  const starting = job.start(true, () => queued());
  starting.catch(() => undefined);
  // A start that fails before its job was queued: nothing was held, nothing runs.
  await Promise.race([enqueued, starting]);
  try {
    const placed = await placeHold(deps.pool, { ...hold, speculative: true });
    deps.policy.observe(hold.accountId, placed, hold.now);
    countHold(deps, placed, "speculative");
    if (!placed.ok) throw budgetRefusalError(placed);
  } catch (error) {
    deps.policy.forget(hold.accountId);
    await job.cancel().catch(() => undefined);
    // The job is cancelled: a hold that was placed after all is released (should the cancel have come
    // too late, the job's settle charges it all the same, as after the sweeper).
    if (holdInDoubt(error)) releaseInDoubt(deps, hold.holdId);
    void starting.then(
      (started) => started.release(),
      () => undefined,
    );
    throw error;
  }
  job.admitted?.();
  try {
    return await starting;
  } catch (error) {
    if (neverRan(error)) await releaseNeverRan(deps, hold.holdId);
    throw error;
  }
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
    (error instanceof ApiError && error.code === "completion_cancelled")
  );
}
