import type { Pool } from "../../db/createPool.ts";
import { withTransaction } from "../../db/withTransaction.ts";
import { appendToStream } from "../../eventStore/appendToStream.ts";
import { ConcurrencyError } from "../../eventStore/concurrencyError.ts";
import type { EventMetadata } from "../../eventStore/types.ts";
import { COMPLETION_STREAM_TYPE, completionStreamId, UsageRecordedSchema, type UsageRecorded } from "../usageRecordedEvent.ts";
import { billingPeriod } from "./billingPeriod.ts";
import { releaseHold } from "./releaseHold.ts";

export type SettleResult = {
  /** False when the completion was already recorded: nothing was appended or charged. */
  recorded: boolean;
  /** The hold released (null if none was open). */
  releasedMicroChf: number | null;
};

/**
 * Records the usage of a finished job and settles its budget, in ONE transaction:
 * 1. appends UsageRecorded to `completion-<id>` with expected version "no_stream" (a job that runs or
 *    settles twice finds the stream and charges nothing: the second call is a no-op);
 * 2. releases the request's hold (hold id = completion id);
 * 3. charges the actual cost to the billing period of `finishedAt` (the same UTC month the usage read
 *    models count it in).
 * A cost can pass the budget only when the hold was swept before the job finished, or when a request
 * admitted at the end of a month finishes in the next one; admission refuses further requests then.
 */
export async function settleUsage(pool: Pool, event: UsageRecorded, metadata: EventMetadata = {}): Promise<SettleResult> {
  const { data } = UsageRecordedSchema.parse(event);
  const period = billingPeriod(new Date(data.finishedAt));
  return withTransaction(pool, async (client) => {
    try {
      await appendToStream(
        client,
        completionStreamId(data.completionId),
        COMPLETION_STREAM_TYPE,
        [{ type: "UsageRecorded", data, metadata: { actor: "worker", ...metadata } }],
        "no_stream",
      );
    } catch (error) {
      if (error instanceof ConcurrencyError) return { recorded: false, releasedMicroChf: null };
      throw error;
    }
    const releasedMicroChf = await releaseHold(client, data.completionId);
    await client.query(
      `INSERT INTO rm_budget AS b (account_id, period_start, budget_micro_chf, spent_micro_chf, held_micro_chf, updated_at)
       SELECT $1::uuid, $2::date,
              COALESCE((SELECT monthly_budget_micro_chf FROM rm_accounts WHERE account_id = $1::uuid), 0),
              $3::bigint, 0, now()
       ON CONFLICT (account_id, period_start) DO UPDATE
          SET spent_micro_chf = b.spent_micro_chf + EXCLUDED.spent_micro_chf, updated_at = EXCLUDED.updated_at`,
      [data.accountId, period.start, data.costMicroChf],
    );
    return { recorded: true, releasedMicroChf };
  });
}
