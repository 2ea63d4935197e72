import type { Pool } from "../../db/createPool.ts";
import { withTransaction } from "../../db/withTransaction.ts";
import { appendToStream } from "../../eventStore/appendToStream.ts";
import { ConcurrencyError } from "../../eventStore/concurrencyError.ts";
import type { EventMetadata } from "../../eventStore/types.ts";
import { COMPLETION_STREAM_TYPE, completionStreamId, UsageRecordedSchema, type UsageRecorded } from "../usageRecordedEvent.ts";
import { billingPeriod } from "./billingPeriod.ts";

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
    // Release the hold and charge the cost in ONE statement, issued last: the account's budget row (which
    // every request of the account updates) stays locked only for the commit, not the whole transaction.
    const settled = await client.query<{ released: string | null; hold_period: string | null }>(
      `WITH h AS (
         DELETE FROM budget_holds WHERE hold_id = $4 RETURNING period_start, amount_micro_chf
       ), charged AS (
         INSERT INTO rm_budget AS b (account_id, period_start, budget_micro_chf, spent_micro_chf, held_micro_chf, updated_at)
         SELECT $1::uuid, $2::date,
                COALESCE((SELECT monthly_budget_micro_chf FROM rm_accounts WHERE account_id = $1::uuid), 0),
                $3::bigint, 0, now()
         ON CONFLICT (account_id, period_start) DO UPDATE
            SET spent_micro_chf = b.spent_micro_chf + EXCLUDED.spent_micro_chf,
                held_micro_chf = b.held_micro_chf - COALESCE((SELECT amount_micro_chf FROM h WHERE h.period_start = b.period_start), 0),
                updated_at = EXCLUDED.updated_at
         RETURNING 1
       )
       SELECT (SELECT amount_micro_chf FROM h) AS released, (SELECT period_start::text FROM h) AS hold_period,
              (SELECT count(*) FROM charged) AS charged_rows`,
      [data.accountId, period.start, data.costMicroChf, data.completionId],
    );
    const row = settled.rows[0]!;
    const releasedMicroChf = row.released === null ? null : Number(row.released);
    if (row.hold_period !== null && row.hold_period !== period.start) {
      // Admitted in one month, finished in the next: the hold sits on the earlier period's row.
      await client.query(
        "UPDATE rm_budget SET held_micro_chf = held_micro_chf - $3, updated_at = now() WHERE account_id = $1 AND period_start = $2::date",
        [data.accountId, row.hold_period, releasedMicroChf],
      );
    }
    return { recorded: true, releasedMicroChf };
  });
}
