import pg from "pg";
import type { Pool } from "../../../db/createPool.ts";
import { isDatabaseUnavailable } from "../../../db/databaseUnavailable.ts";
import { releaseHold } from "../../../ledger/budget/releaseHold.ts";

/**
 * When the attempts run, after the placement failed: a statement whose connection was lost may still
 * commit afterwards (the server finishes it before it notices the client is gone, or a partition
 * heals), so one attempt is not enough; releasing is idempotent, so every attempt runs.
 */
export const IN_DOUBT_RELEASE_AFTER_MS = [200, 1000, 3000, 10_000, 30_000] as const;

/**
 * Whether a failed placeHold may have committed all the same: its connection was lost or went silent
 * with the statement on the wire (pg's own connection errors, not an answer from the server: a
 * statement the server refused or cancelled did not commit).
 */
export function holdInDoubt(error: unknown): boolean {
  return isDatabaseUnavailable(error) && !(error instanceof pg.DatabaseError);
}

/**
 * Releases, in the background, a hold whose placement failed in doubt, for a request that was answered
 * with an error and whose job was never started (or was cancelled): without this the hold would stay
 * on the budget until the sweeper (BUDGET_HOLD_MAX_AGE_S). Safe whatever the hold's state: a hold that
 * was never placed, or was settled by a job that ran after all, is left alone (releaseHold).
 */
export function releaseHoldInDoubt(pool: Pool, holdId: string, onReleased: () => void, afterMs: readonly number[] = IN_DOUBT_RELEASE_AFTER_MS): void {
  let released = false;
  for (const ms of afterMs) {
    const timer = setTimeout(() => {
      if (released) return;
      releaseHold(pool, holdId).then(
        (amount) => {
          if (amount === null || released) return;
          released = true;
          onReleased();
        },
        () => undefined,
      );
    }, ms);
    timer.unref();
  }
}
