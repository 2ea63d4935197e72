import { randomUUID } from "node:crypto";
import type { Pool } from "../../db/createPool.ts";
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
 * Records the usage of a finished job and settles its budget, in ONE statement (so one round trip and
 * one implicit transaction, committed durably):
 * 1. appends UsageRecorded as version 1 of `completion-<id>`, expected version "no_stream": the stream
 *    row is inserted with ON CONFLICT DO NOTHING, and everything below depends on that insert, so a job
 *    that runs or settles twice finds the stream and changes nothing (recorded: false);
 * 2. releases the request's hold (hold id = completion id);
 * 3. charges the actual cost to the billing period of `finishedAt` (the same UTC month the usage read
 *    models count it in); a hold placed in an earlier month is taken off that month's row.
 *
 * It writes es_streams / es_events itself instead of calling appendToStream (same columns, same
 * semantics for this single-event, no-stream case), because that takes five round trips inside a
 * transaction, and settling runs once per request: the round trips were most of the worker's database
 * time, and the budget row stayed locked across them.
 * A cost can pass the budget only when the hold was swept before the job finished, or when a request
 * admitted at the end of a month finishes in the next one; admission refuses further requests then.
 */
export async function settleUsage(pool: Pool, event: UsageRecorded, metadata: EventMetadata = {}): Promise<SettleResult> {
  const { data } = UsageRecordedSchema.parse(event);
  const period = billingPeriod(new Date(data.finishedAt));
  const settled = await pool.query<{ recorded: boolean; released: string | null }>({
    name: "settle-usage",
    text: SETTLE_SQL,
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
    ],
  });
  const row = settled.rows[0]!;
  return { recorded: row.recorded, releasedMicroChf: row.released === null ? null : Number(row.released) };
}

/**
 * $1 stream id, $2 stream type, $3 event id, $4 data, $5 metadata, $6 hold id, $7 account id,
 * $8 period start of finishedAt, $9 cost (micro-CHF). Data-modifying CTEs run once each and see the same
 * snapshot; `stream` is empty when the completion was already recorded, which turns every other part
 * into a no-op. `charged` and `released_earlier` touch different rm_budget rows (different periods).
 */
const SETTLE_SQL = `
WITH stream AS (
  INSERT INTO es_streams (stream_id, stream_type, version) VALUES ($1, $2, 1)
  ON CONFLICT (stream_id) DO NOTHING
  RETURNING stream_id
), appended AS (
  INSERT INTO es_events (stream_id, stream_version, event_id, event_type, schema_version, data, metadata)
  SELECT stream_id, 1, $3::uuid, 'UsageRecorded', 1, $4::jsonb, $5::jsonb FROM stream
  RETURNING 1
), h AS (
  DELETE FROM budget_holds WHERE hold_id = $6 AND EXISTS (SELECT 1 FROM stream)
  RETURNING period_start, amount_micro_chf
), charged AS (
  INSERT INTO rm_budget AS b (account_id, period_start, budget_micro_chf, spent_micro_chf, held_micro_chf, updated_at)
  SELECT $7::uuid, $8::date,
         COALESCE((SELECT monthly_budget_micro_chf FROM rm_accounts WHERE account_id = $7::uuid), 0),
         $9::bigint, 0, now()
   WHERE EXISTS (SELECT 1 FROM stream)
  ON CONFLICT (account_id, period_start) DO UPDATE
     SET spent_micro_chf = b.spent_micro_chf + EXCLUDED.spent_micro_chf,
         held_micro_chf = b.held_micro_chf - COALESCE((SELECT amount_micro_chf FROM h WHERE h.period_start = b.period_start), 0),
         updated_at = EXCLUDED.updated_at
  RETURNING 1
), released_earlier AS (
  UPDATE rm_budget b
     SET held_micro_chf = b.held_micro_chf - h.amount_micro_chf, updated_at = now()
    FROM h
   WHERE b.account_id = $7::uuid AND b.period_start = h.period_start AND h.period_start <> $8::date
  RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM stream) AS recorded,
       (SELECT amount_micro_chf FROM h) AS released,
       (SELECT count(*) FROM appended) + (SELECT count(*) FROM charged) + (SELECT count(*) FROM released_earlier) AS written`;
