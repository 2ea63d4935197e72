import type { Pool } from "../../db/createPool.ts";
import { GroupedCalls, type GroupedCallsOptions } from "../../db/groupedCalls.ts";
import { foldSettledHold } from "./foldSettledHold.ts";
import { foldSettledHolds } from "./foldSettledHolds.ts";

/**
 * Group commit of the budget half of settling (foldSettledHold): the folds asked for while earlier ones
 * run are done together by ONE statement (foldSettledHolds), which also updates a budget row that many
 * of them charge (the usages of one account) once instead of once each. A fold that a failed group did
 * not do is done again on its own, its error going to its own caller; a fold is safe to repeat (a hold
 * already folded returns null). Run on `pool`, connections with synchronous_commit off (see recordUsage).
 */
export class SettledHoldFolds {
  readonly #calls: GroupedCalls<string, number | null>;

  constructor(pool: Pool, options: GroupedCallsOptions = {}) {
    this.#calls = new GroupedCalls<string, number | null>(
      { group: (holdIds) => foldSettledHolds(pool, holdIds), one: (holdId) => foldSettledHold(pool, holdId) },
      options,
    );
  }

  /** foldSettledHold of `holdId`, shared with the folds asked for at the same time. */
  fold(holdId: string): Promise<number | null> {
    return this.#calls.call(holdId);
  }
}
