import type { Queryable } from "../eventStore/types.ts";
import { foldSettledHolds } from "./foldSettledHolds.ts";

/**
 * The second half of settling (see recordUsage): folds one settled hold into rm_budget in one
 * statement: deletes the hold, takes its amount off `held` of the period it was placed in and adds the
 * actual cost to `spent` of the period the job finished in (the same row unless the job crossed a month
 * boundary). Returns the hold's amount, or null when there is no settled hold of that id (already
 * folded, or not settled yet): safe to call more than once and from the sweeper. The statement is
 * foldSettledHolds' (a group of holds is folded by the same one).
 *
 * Run it on connections with synchronous_commit off: the budget row is locked only until the commit,
 * which then does not wait for a disk flush. Losing the fold in a crash loses nothing: the settled hold
 * is still there (its first half was durable) and the sweeper folds it again.
 */
export async function foldSettledHold(db: Queryable, holdId: string): Promise<number | null> {
  const [released] = await foldSettledHolds(db, [holdId]);
  return released ?? null;
}
