import type { Clock } from "../../clock.ts";
import type { Pool } from "../../db/createPool.ts";
import { ModelUnavailableError } from "../../http/errors.ts";
import { budgetRefusalError } from "./budgetRefusalError.ts";
import { jobHoldMicroChf, type HoldableModel, type HoldableWork } from "./jobHoldMicroChf.ts";
import { placeHold, type PlaceHoldInput } from "./placeHold.ts";
import { releaseHold } from "./releaseHold.ts";
import type { SpeculationPolicy } from "./speculationPolicy.ts";

export type AdmissionInput = { completionId: string; accountId: string; work: HoldableWork; model: HoldableModel };

export type AdmissionDeps = { pool: Pool; clock: Clock; policy: SpeculationPolicy };

/** How admission drives the job: start it (enqueue, wait for a worker), or cancel it once enqueued. */
export type AdmittedStart<T extends { release(): void }> = {
  start(speculative: boolean): Promise<T>;
  /** Takes a speculatively started job off the queue, or has its worker abort it. */
  cancel(): Promise<void>;
};

/**
 * Admission around an enqueue: holds the job's worst-case cost on the monthly budget (429
 * monthly_budget_exceeded or 402 when it does not fit) and starts the job. Nothing reaches the client
 * before the hold is placed. Two ways, chosen by the SpeculationPolicy:
 *
 * - careful: hold first, then start;
 * - speculative (the account's last hold left ample budget): hold and start at the same time, which
 *   takes the hold's database round trip off the way to the first token. If the hold is refused (or
 *   fails), the job is cancelled; the refusal is recorded by the hold statement itself, so the worker
 *   never charges it even if the cancel comes too late.
 *
 * When the start fails with model_unavailable the job never ran, so the hold is released at once;
 * after any other failure the job may still run and settle, and the hold is left to its settle or to
 * the sweeper.
 */
export async function admitWithHold<T extends { release(): void }>(deps: AdmissionDeps, input: AdmissionInput, job: AdmittedStart<T>): Promise<T> {
  const now = deps.clock.now();
  const hold: PlaceHoldInput = {
    holdId: input.completionId,
    accountId: input.accountId,
    amountMicroChf: jobHoldMicroChf(input.work, input.model),
    now,
  };
  const speculative = deps.policy.maySpeculate(input.accountId, hold.amountMicroChf, now);
  // Speculative: the enqueue goes out first, the hold right behind it (the first token needs the job
  // on its way to a worker; the hold's answer is needed only before anything is sent to the client).
  const starting = speculative ? job.start(true) : null;
  starting?.catch(() => undefined);
  const holding = placeHold(deps.pool, { ...hold, speculative });
  try {
    const placed = await holding;
    deps.policy.observe(input.accountId, placed, now);
    if (!placed.ok) throw budgetRefusalError(placed);
  } catch (error) {
    deps.policy.forget(input.accountId);
    if (starting) {
      await job.cancel().catch(() => undefined);
      void starting.then((started) => started.release(), () => undefined);
    }
    throw error;
  }
  try {
    return await (starting ?? job.start(false));
  } catch (error) {
    if (error instanceof ModelUnavailableError) await releaseHold(deps.pool, input.completionId).catch(() => null);
    throw error;
  }
}
