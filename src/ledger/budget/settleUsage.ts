import { randomUUID } from "node:crypto";
import type { Pool } from "../../db/createPool.ts";
import type { Queryable } from "../eventStore/types.ts";
import type { EventMetadata } from "../eventStore/types.ts";
import { COMPLETION_STREAM_TYPE, completionStreamId, UsageRecordedSchema, type UsageRecorded } from "../usageRecordedEvent.ts";
import { billingPeriod } from "./billingPeriod.ts";
import { foldSettledHold } from "./foldSettledHold.ts";

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
 * Records the usage of a finished job and settles its budget, in two statements:
 *
 * 1. recordUsage (durable, on `pool`): appends UsageRecorded as version 1 of `completion-<id>` and marks
 *    the request's hold as settled with the actual cost (a hold that is gone, swept or never placed, is
 *    recreated as a settled hold of amount 0), in ONE statement. The stream row is inserted with ON
 *    CONFLICT DO NOTHING and the rest depends on it: a job that settles twice changes nothing the
 *    second time (recorded: false).
 * 2. foldSettledHold (on `foldPool`, whose commits do not wait for the WAL flush): releases the hold
 *    and charges the cost to the billing period of `finishedAt`.
 *
 * The split keeps the account's budget row, which every admission of the account updates, out of the
 * durable commit: a disk flush (hundreds of milliseconds when the disk stalls) never holds up
 * admissions. Until the fold, the hold's worst-case amount still counts as held, so the budget is never
 * understated; a fold lost in a crash is redone by the sweeper. The fold runs even when the usage was
 * already recorded, so a retried settle completes a fold that failed.
 */
export async function settleUsage(
  pool: Pool,
  event: UsageRecorded,
  metadata: EventMetadata = {},
  foldPool: Pool = pool,
  options: RecordUsageOptions = {},
): Promise<SettleResult> {
  const recorded = await recordUsage(pool, event, metadata, options);
  if (recorded.admission === "admitted") await foldSettledHold(foldPool, event.data.completionId);
  return recorded;
}

/** Step 1 of settleUsage: the usage event and the settled mark, in one durable statement. */
export async function recordUsage(db: Queryable, event: UsageRecorded, metadata: EventMetadata = {}, options: RecordUsageOptions = {}): Promise<SettleResult> {
  const { data } = UsageRecordedSchema.parse(event);
  const period = billingPeriod(new Date(data.finishedAt));
  const recorded = await db.query<{ recorded: boolean; held: string | null; hold_seen: boolean; refused: boolean }>({
    name: "record-usage-v2",
    text: RECORD_USAGE_SQL,
    values: [
      completionStreamId(data.completionId),
      COMPLETION_STREAM_TYPE,
      randomUUID(),
      JSON.stringify(data),
      JSON.stringify({ actor: "worker", ...metadata }),
      data.completionId,
      data.accountId,
      period.start,
      data.costMicroChf,
      options.requireAdmission === true,
    ],
  });
  const row = recorded.rows[0]!;
  const admission = row.refused ? "refused" : row.hold_seen || !options.requireAdmission ? "admitted" : "pending";
  return { recorded: row.recorded, releasedMicroChf: row.held === null ? null : Number(row.held), admission };
}

/**
 * $1 stream id, $2 stream type, $3 event id, $4 data, $5 metadata, $6 hold id, $7 account id,
 * $8 period start of finishedAt, $9 cost (micro-CHF), $10 require the hold (nothing is written unless
 * the hold exists or the usage was already recorded). A recorded refusal (only speculative admissions
 * have one) always blocks the write; `hold_seen` / `refused` say what was found. Writes es_streams / es_events itself instead of
 * calling appendToStream (same columns and semantics for this single-event, no-stream case): that takes
 * five round trips in a transaction, and this runs once per request. `held` is the amount of the hold
 * the request had (null when it had none, and a settled hold of amount 0 was created instead).
 */
const RECORD_USAGE_SQL = `
WITH admission AS (
  SELECT EXISTS (SELECT 1 FROM budget_holds WHERE hold_id = $6) OR EXISTS (SELECT 1 FROM es_streams WHERE stream_id = $1) AS hold_seen,
         EXISTS (SELECT 1 FROM refused_holds WHERE hold_id = $6) AS refused
), stream AS (
  INSERT INTO es_streams (stream_id, stream_type, version)
  SELECT $1, $2, 1 FROM admission WHERE NOT refused AND (hold_seen OR NOT $10::boolean)
  ON CONFLICT (stream_id) DO NOTHING
  RETURNING stream_id
), appended AS (
  INSERT INTO es_events (stream_id, stream_version, event_id, event_type, schema_version, data, metadata)
  SELECT stream_id, 1, $3::uuid, 'UsageRecorded', 1, $4::jsonb, $5::jsonb FROM stream
  RETURNING 1
), settled AS (
  INSERT INTO budget_holds (hold_id, account_id, period_start, amount_micro_chf, created_at, settled_cost_micro_chf, settled_period, settled_at)
  SELECT $6, $7::uuid, $8::date, 0, now(), $9::bigint, $8::date, now() FROM stream
  ON CONFLICT (hold_id) DO UPDATE
     SET settled_cost_micro_chf = EXCLUDED.settled_cost_micro_chf,
         settled_period = EXCLUDED.settled_period,
         settled_at = EXCLUDED.settled_at
  RETURNING (xmax = 0) AS created, amount_micro_chf
)
SELECT EXISTS (SELECT 1 FROM stream) AS recorded,
       (SELECT CASE WHEN created THEN NULL ELSE amount_micro_chf END FROM settled) AS held,
       (SELECT count(*) FROM appended) AS appended,
       (SELECT hold_seen FROM admission) AS hold_seen,
       (SELECT refused FROM admission) AS refused`;
