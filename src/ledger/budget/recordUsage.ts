import { appendToStream } from "../eventStore/appendToStream.ts";
import { ConcurrencyError } from "../eventStore/concurrencyError.ts";
import type { Queryable } from "../eventStore/types.ts";
import type { EventMetadata } from "../eventStore/types.ts";
import { COMPLETION_STREAM_TYPE, completionStreamId, UsageRecordedSchema, type UsageRecorded } from "../usageRecordedEvent.ts";
import { billingPeriod } from "./billingPeriod.ts";

export type SettleResult = {
  /** False when the completion was already recorded, or not recorded because of `admission`. */
  recorded: boolean;
  /** The hold released (null if none was open). */
  releasedMicroChf: number | null;
  /**
   * What the settle found of the request's admission: "refused" (a speculative admission's refusal is
   * recorded: nothing was recorded or charged), "pending" (only with `requireAdmission`: neither the
   * hold nor a refusal is there yet, nothing was recorded, ask again) or "admitted".
   */
  admission: "admitted" | "refused" | "pending";
};

export type RecordUsageOptions = {
  /**
   * The job was admitted speculatively (enqueued while its hold was being placed) and its admission may
   * not be decided yet: record only once its hold is there. Without it, a missing hold (swept, or lost
   * in a crash) is recreated as a settled hold of amount 0 and the usage is charged. A refused
   * admission is never recorded either way.
   */
  requireAdmission?: boolean;
};

/**
 * The durable half of settling a finished job's usage (the worker's UsageRecorder runs it through
 * UsageGroupCommit, then foldSettledHold), on `db` inside the caller's transaction: the admission check,
 * the usage event (appended through appendToStream, the one way into the log, as version 1 of
 * `completion-<id>` expecting no stream: a job that settles twice changes nothing the second time,
 * recorded: false) and the settled mark on the request's hold (a hold that is gone, swept or never
 * placed, is recreated as a settled hold of amount 0). Writes nothing when the admission was refused
 * (only speculative admissions have a recorded refusal), when `requireAdmission` and neither the hold
 * nor the usage is there yet ("pending"), or when the usage is already recorded.
 *
 * The second half, foldSettledHold, runs on connections whose commits do not wait for the WAL flush: it
 * releases the hold and charges the cost to the billing period of `finishedAt`. The split keeps the
 * account's budget row, which every admission of the account updates, out of the durable commit: a disk
 * flush (hundreds of milliseconds when the disk stalls) never holds up admissions. Until the fold, the
 * hold's worst-case amount still counts as held, so the budget is never understated; a fold lost in a
 * crash is redone by the sweeper.
 */
export async function recordUsage(db: Queryable, event: UsageRecorded, metadata: EventMetadata = {}, options: RecordUsageOptions = {}): Promise<SettleResult> {
  const { data } = UsageRecordedSchema.parse(event);
  const streamId = completionStreamId(data.completionId);
  const found = await db.query<{ hold_seen: boolean; refused: boolean }>({
    name: "usage-admission-v1",
    text: ADMISSION_SQL,
    values: [data.completionId, streamId],
  });
  const { hold_seen: holdSeen, refused } = found.rows[0]!;
  const admission = refused ? "refused" : holdSeen || !options.requireAdmission ? "admitted" : "pending";
  const notRecorded: SettleResult = { recorded: false, releasedMicroChf: null, admission };
  if (admission !== "admitted") return notRecorded;
  try {
    await appendToStream(db, streamId, COMPLETION_STREAM_TYPE, [{ type: "UsageRecorded", data, metadata: { actor: "worker", ...metadata } }], "no_stream");
  } catch (error) {
    if (error instanceof ConcurrencyError) return notRecorded;
    throw error;
  }
  const period = billingPeriod(new Date(data.finishedAt)).start;
  const settled = await db.query<{ created: boolean; amount: string }>({
    name: "usage-settle-hold-v1",
    text: SETTLE_HOLD_SQL,
    values: [data.completionId, data.accountId, period, data.costMicroChf],
  });
  const hold = settled.rows[0]!;
  return { recorded: true, releasedMicroChf: hold.created ? null : Number(hold.amount), admission };
}

/** $1 hold id, $2 stream id: is there a hold (or already the usage), and was the admission refused. */
const ADMISSION_SQL = `
SELECT EXISTS (SELECT 1 FROM budget_holds WHERE hold_id = $1) OR EXISTS (SELECT 1 FROM es_streams WHERE stream_id = $2) AS hold_seen,
       EXISTS (SELECT 1 FROM refused_holds WHERE hold_id = $1) AS refused`;

/**
 * $1 hold id, $2 account id, $3 period start of finishedAt, $4 cost (micro-CHF). Marks the hold settled
 * with the actual cost, or creates a settled hold of amount 0 when it is gone; `created` says which.
 */
const SETTLE_HOLD_SQL = `
INSERT INTO budget_holds (hold_id, account_id, period_start, amount_micro_chf, created_at, settled_cost_micro_chf, settled_period, settled_at)
VALUES ($1, $2::uuid, $3::date, 0, now(), $4::bigint, $3::date, now())
ON CONFLICT (hold_id) DO UPDATE
   SET settled_cost_micro_chf = EXCLUDED.settled_cost_micro_chf,
       settled_period = EXCLUDED.settled_period,
       settled_at = EXCLUDED.settled_at
RETURNING (xmax = 0) AS created, amount_micro_chf AS amount`;
