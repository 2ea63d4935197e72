import type { Clock } from "../../clock.ts";
import type { Pool } from "../../db/createPool.ts";
import { ModelUnavailableError } from "../../http/errors.ts";
import { jobHoldMicroChf, type HoldableModel, type HoldableWork } from "./jobHoldMicroChf.ts";
import { placeHoldOrThrow } from "./placeHoldOrThrow.ts";
import { releaseHold } from "./releaseHold.ts";

export type AdmissionInput = { completionId: string; accountId: string; work: HoldableWork; model: HoldableModel };

/**
 * Admission around an enqueue: holds the job's worst-case cost (429 monthly_budget_exceeded or 402 when
 * it does not fit), then runs `start` (enqueue and wait for a worker). When `start` fails with
 * model_unavailable the job never ran (no live worker, or it was taken off the queue), so the hold is
 * released at once; after any other failure the job may still run and settle, and the hold is left to
 * its settle or to the sweeper.
 */
export async function admitWithHold<T>(deps: { pool: Pool; clock: Clock }, input: AdmissionInput, start: () => Promise<T>): Promise<T> {
  await placeHoldOrThrow(deps.pool, {
    holdId: input.completionId,
    accountId: input.accountId,
    amountMicroChf: jobHoldMicroChf(input.work, input.model),
    now: deps.clock.now(),
  });
  try {
    return await start();
  } catch (error) {
    if (error instanceof ModelUnavailableError) await releaseHold(deps.pool, input.completionId).catch(() => null);
    throw error;
  }
}
