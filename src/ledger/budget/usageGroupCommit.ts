import type { Pool } from "../../db/createPool.ts";
import { GroupedCalls, type GroupedCallsOptions } from "../../db/groupedCalls.ts";
import { withTransaction } from "../../db/withTransaction.ts";
import type { EventMetadata } from "../eventStore/types.ts";
import type { UsageRecorded } from "../usageRecordedEvent.ts";
import { recordUsage } from "./recordUsage.ts";
import { recordUsages, type RecordUsageOptions, type SettleResult, type UsageToRecord } from "./recordUsages.ts";

export type UsageGroupCommitOptions = GroupedCallsOptions;

/**
 * Group commit of the durable half of settling (recordUsage: the UsageRecorded append and the settled mark):
 * the usages that finish while earlier ones are being committed are recorded together, in ONE
 * transaction and one durable commit, by one statement per stage for the whole group (recordUsages: the
 * admission check, the append, the settled mark: five statements with BEGIN and COMMIT, not five per
 * usage), instead of one transaction each. Each is still recorded exactly once, as alone:
 *
 * - a usage's promise settles only after the transaction holding it committed, so whoever waits on it
 *   (the worker, before it completes its job) never goes on with a usage that a crash could still undo;
 *   a process killed mid-batch commits none of the batch (the server rolls it back) and each job runs
 *   again as after any crash;
 * - when the batch fails (any statement error, a lost connection, even at COMMIT), every usage of it is
 *   recorded again on its own, in its own transaction, its error going to its own caller: the append
 *   expects no stream, so a usage whose batch did commit after all is found and not recorded twice.
 *
 * Batches form as GroupedCalls forms them: nothing waits for a timer (alone at low load, so one
 * stream's time is unchanged); at most `maxBatch` (64) usages a transaction, `maxInFlight` (2) at once.
 */
export class UsageGroupCommit {
  readonly #calls: GroupedCalls<UsageToRecord, SettleResult>;

  constructor(pool: Pool, options: UsageGroupCommitOptions = {}) {
    this.#calls = new GroupedCalls<UsageToRecord, SettleResult>(
      {
        group: (usages) => withTransaction(pool, (client) => recordUsages(client, usages)),
        one: ({ event, metadata, options }) => withTransaction(pool, (client) => recordUsage(client, event, metadata, options)),
      },
      options,
    );
  }

  /** recordUsage of `event` in a committed transaction (shared with other usages); see recordUsage. */
  record(event: UsageRecorded, metadata: EventMetadata = {}, options: RecordUsageOptions = {}): Promise<SettleResult> {
    return this.#calls.call({ event, metadata, options });
  }
}
