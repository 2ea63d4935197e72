import type { Queryable } from "../eventStore/types.ts";
import { completionStreamId } from "../usageRecordedEvent.ts";

export type RefuseHoldInput = {
  /** The completion id (the hold's id). */
  holdId: string;
  now: Date;
  /**
   * true: record the refusal only when neither the hold nor the completion's usage is there (a hold
   * statement that committed unseen admitted the request after all); false: record it whatever is there.
   */
  unlessPlaced: boolean;
};

export type RefuseHoldResult = {
  /** The refusal is recorded (now, or it already was): the job's settle charges nothing from now on. */
  refused: boolean;
  /** The hold or the completion's usage was there when the statement ran. */
  placed: boolean;
  /** The completion's usage was already recorded (charged): a refusal recorded now came too late for it. */
  charged: boolean;
};

const REFUSE_HOLD_SQL = `WITH found AS (
    SELECT EXISTS (SELECT 1 FROM budget_holds WHERE hold_id = $1) AS held,
           EXISTS (SELECT 1 FROM es_streams WHERE stream_id = $2) AS charged
  ), refused AS (
    INSERT INTO refused_holds (hold_id, refused_at)
    SELECT $1, $3::timestamptz FROM found WHERE NOT ($4::boolean AND (found.held OR found.charged))
    ON CONFLICT (hold_id) DO NOTHING
  ), noted AS (
    INSERT INTO undelivered_replies (completion_id, delivered_completion_tokens)
    SELECT $1, -1 FROM found WHERE NOT ($4::boolean AND (found.held OR found.charged))
    ON CONFLICT (completion_id) DO NOTHING
  )
  SELECT held, charged FROM found`;

/**
 * Records the refusal of a speculative admission whose hold statement FAILED (rather than was refused:
 * a refusal is recorded by placeHold itself), in refused_holds, where the job's settle (recordUsages)
 * looks first: from then on its usage is never recorded, whether the hold is there or not. One
 * statement, idempotent (ON CONFLICT DO NOTHING), so it can be retried until PostgreSQL answers.
 *
 * With `unlessPlaced`, the refusal is recorded only when neither the hold nor the usage is there: a
 * hold statement whose connection was lost may have committed unseen, and the request is then admitted
 * after all. (A hold statement still running on the server may commit after this one: both are then
 * there, and the refusal wins, since a settle looks at it first.)
 *
 * The request the refusal is recorded for was answered with an error: the same statement notes its reply
 * undelivered (undelivered_replies, nothing sent), so that a charge recorded before the refusal landed
 * (its hold committed late, its job finished and was settled while PostgreSQL did not answer the API:
 * a network partition) is refunded whole by the projector's sweeper (UsageRefunded).
 */
export async function refuseHold(db: Queryable, input: RefuseHoldInput): Promise<RefuseHoldResult> {
  const result = await db.query<{ held: boolean; charged: boolean }>({
    name: "refuse-budget-hold-v2",
    text: REFUSE_HOLD_SQL,
    values: [input.holdId, completionStreamId(input.holdId), input.now.toISOString(), input.unlessPlaced],
  });
  const row = result.rows[0]!;
  const placed = row.held || row.charged;
  return { refused: !(input.unlessPlaced && placed), placed, charged: row.charged };
}
