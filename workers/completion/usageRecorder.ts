import type { Pool } from "../../src/db/createPool.ts";
import type { EventMetadata } from "../../src/eventStore/types.ts";
import { UsageRecordedDataSchema, type UsageRecorded, type UsageRecordedData } from "../../src/inference/usage/usageRecordedEvent.ts";
import { settleUsage } from "../../src/usage/budget/settleUsage.ts";

/**
 * Records a finished job's usage and settles its budget hold: settleUsage appends UsageRecorded to
 * `completion-<id>` with expected version "no_stream" (the stream exists only once, so a job that runs
 * again, retried or stalled, can never record, and so charge, twice) and marks the request's hold
 * settled in one durable statement, then folds the hold into the budget (releases it, charges the actual
 * cost). Transient database errors are retried a few times (safe: a retry finds the stream, records
 * nothing again and only completes a fold that did not happen).
 */
export class UsageRecorder {
  readonly #pool: Pool;
  readonly #foldPool: Pool;
  readonly #retries: number;

  /** `foldPool`: connections with synchronous_commit off, for the budget half of the settle (settleUsage). */
  constructor(pool: Pool, options: { retries?: number; foldPool?: Pool } = {}) {
    this.#pool = pool;
    this.#foldPool = options.foldPool ?? pool;
    this.#retries = options.retries ?? 3;
  }

  async record(data: UsageRecordedData, metadata: EventMetadata): Promise<"recorded" | "already_recorded"> {
    const event: UsageRecorded = { type: "UsageRecorded", data: UsageRecordedDataSchema.parse(data) };
    for (let attempt = 0; ; attempt++) {
      try {
        const result = await settleUsage(this.#pool, event, metadata, this.#foldPool);
        return result.recorded ? "recorded" : "already_recorded";
      } catch (error) {
        if (attempt >= this.#retries) throw error;
        await new Promise((resolve) => setTimeout(resolve, 50 * 2 ** attempt));
      }
    }
  }
}
