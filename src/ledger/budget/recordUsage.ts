import type { EventMetadata, Queryable } from "../eventStore/types.ts";
import type { UsageRecorded } from "../usageRecordedEvent.ts";
import { recordUsages, type RecordUsageOptions, type SettleResult } from "./recordUsages.ts";

export type { RecordUsageOptions, SettleResult } from "./recordUsages.ts";

/**
 * The durable half of settling a finished job's usage (the worker's UsageRecorder runs it through
 * UsageGroupCommit, then foldSettledHold), on `db` inside the caller's transaction: the admission check,
 * the usage event (appended through the event store, the one way into the log, as version 1 of
 * `completion-<id>` expecting no stream: a job that settles twice changes nothing the second time,
 * recorded: false) and the settled mark on the request's hold (a hold that is gone, swept or never
 * placed, is recreated as a settled hold of amount 0). Writes nothing when the admission was refused
 * (only speculative admissions have a recorded refusal), when `requireAdmission` and neither the hold
 * nor the usage is there yet ("pending"), or when the usage is already recorded. Three statements at
 * most: recordUsages of this one usage (a group is recorded with the same three).
 *
 * The second half, foldSettledHold, runs on connections whose commits do not wait for the WAL flush: it
 * releases the hold and charges the cost to the billing period of `finishedAt`. The split keeps the
 * account's budget row, which every admission of the account updates, out of the durable commit: a disk
 * flush (hundreds of milliseconds when the disk stalls) never holds up admissions. Until the fold, the
 * hold's worst-case amount still counts as held, so the budget is never understated; a fold lost in a
 * crash is redone by the sweeper.
 */
export async function recordUsage(db: Queryable, event: UsageRecorded, metadata: EventMetadata = {}, options: RecordUsageOptions = {}): Promise<SettleResult> {
  const [result] = await recordUsages(db, [{ event, metadata, options }]);
  return result!;
}
