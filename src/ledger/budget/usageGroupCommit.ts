import type { Pool } from "../../db/createPool.ts";
import { withTransaction } from "../../db/withTransaction.ts";
import type { EventMetadata } from "../eventStore/types.ts";
import type { UsageRecorded } from "../usageRecordedEvent.ts";
import { recordUsage, type RecordUsageOptions, type SettleResult } from "./recordUsage.ts";

type Pending = {
  event: UsageRecorded;
  metadata: EventMetadata;
  options: RecordUsageOptions;
  resolve: (result: SettleResult) => void;
  reject: (error: unknown) => void;
};

export type UsageGroupCommitOptions = {
  /** Most usages in one transaction. */
  maxBatch?: number;
  /** Transactions open at once. */
  maxInFlight?: number;
};

/**
 * Group commit of the durable half of settling (recordUsage: the UsageRecorded append and the settled mark):
 * the usages that finish while earlier ones are being committed are recorded together, in ONE
 * transaction and one durable commit, instead of one transaction each. Each is still recorded exactly
 * once, by the same statements as alone:
 *
 * - a usage's promise settles only after the transaction holding it committed, so whoever waits on it
 *   (the worker, before it completes its job) never goes on with a usage that a crash could still undo;
 *   a process killed mid-batch commits none of the batch (the server rolls it back) and each job runs
 *   again as after any crash;
 * - when the batch fails (any statement error, a lost connection, even at COMMIT), every usage of it is
 *   recorded again on its own, in its own transaction, its error going to its own caller: the append
 *   expects no stream, so a usage whose batch did commit after all is found and not recorded twice.
 *
 * Nothing waits for a timer: a usage with no transaction ahead of it is committed at the end of the
 * current event-loop turn (alone at low load, so one stream's time is unchanged); batches form only
 * while `maxInFlight` transactions are already running.
 */
export class UsageGroupCommit {
  readonly #pool: Pool;
  readonly #maxBatch: number;
  readonly #maxInFlight: number;
  readonly #queue: Pending[] = [];
  #inFlight = 0;
  #scheduled = false;

  constructor(pool: Pool, options: UsageGroupCommitOptions = {}) {
    this.#pool = pool;
    this.#maxBatch = options.maxBatch ?? 64;
    this.#maxInFlight = options.maxInFlight ?? 2;
  }

  /** recordUsage of `event` in a committed transaction (shared with other usages); see recordUsage. */
  record(event: UsageRecorded, metadata: EventMetadata = {}, options: RecordUsageOptions = {}): Promise<SettleResult> {
    return new Promise<SettleResult>((resolve, reject) => {
      this.#queue.push({ event, metadata, options, resolve, reject });
      this.#schedule();
    });
  }

  #schedule(): void {
    if (this.#scheduled || this.#inFlight >= this.#maxInFlight || this.#queue.length === 0) return;
    this.#scheduled = true;
    // The end of this turn: every usage recorded during it joins the batch.
    setImmediate(() => {
      this.#scheduled = false;
      this.#startBatch();
    });
  }

  #startBatch(): void {
    if (this.#inFlight >= this.#maxInFlight || this.#queue.length === 0) return;
    const batch = this.#queue.splice(0, this.#maxBatch);
    this.#inFlight += 1;
    void this.#commit(batch).finally(() => {
      this.#inFlight -= 1;
      this.#schedule();
    });
    this.#schedule();
  }

  async #commit(batch: Pending[]): Promise<void> {
    if (batch.length > 1) {
      let results: SettleResult[] | null = null;
      try {
        results = await withTransaction(this.#pool, async (client) => {
          const out: SettleResult[] = [];
          for (const item of batch) out.push(await recordUsage(client, item.event, item.metadata, item.options));
          return out;
        });
      } catch {
        // Nothing of the batch is known to be written: each on its own (below).
      }
      if (results !== null) {
        for (const [i, item] of batch.entries()) item.resolve(results[i]!);
        return;
      }
    }
    await Promise.all(
      batch.map((item) =>
        withTransaction(this.#pool, (client) => recordUsage(client, item.event, item.metadata, item.options)).then(item.resolve, item.reject),
      ),
    );
  }
}
