import { appendToNewStreams, type NewStreamOutcome } from "../eventStore/appendToNewStreams.ts";
import type { EventMetadata, Queryable } from "../eventStore/types.ts";
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

/** One usage to record, as recordUsage takes it. */
export type UsageToRecord = { event: UsageRecorded; metadata?: EventMetadata; options?: RecordUsageOptions };

type Parsed = { index: number; data: UsageRecorded["data"]; metadata: EventMetadata; requireAdmission: boolean };

/**
 * recordUsage of every usage of `usages`, on `db` inside the caller's transaction, with a fixed number
 * of statements whatever their number: one admission check for all of them, one append of all their
 * UsageRecorded events (appendToNewStreams: each to `completion-<id>`, expecting no stream) and one
 * settled mark for all their holds. Each usage ends exactly as if recordUsage had run for each in turn,
 * in the order given (the results are in that order):
 *
 * - usages of different completions do not see each other (different streams and holds), so they are
 *   checked, appended and marked together;
 * - a completion named more than once (a redelivered job racing its first run) is recorded by its first
 *   occurrence; each later occurrence goes into the next round of the same three statements, where it
 *   finds what the earlier one wrote (the stream: recorded false), as it would in turn. Rounds are
 *   as many as the most occurrences of one completion: one, but for such a race.
 */
export async function recordUsages(db: Queryable, usages: UsageToRecord[]): Promise<SettleResult[]> {
  const rounds: Parsed[][] = [];
  const seen = new Map<string, number>();
  usages.forEach(({ event, metadata = {}, options = {} }, index) => {
    const { data } = UsageRecordedSchema.parse(event);
    const round = seen.get(data.completionId) ?? 0;
    seen.set(data.completionId, round + 1);
    if (round === rounds.length) rounds.push([]);
    rounds[round]!.push({ index, data, metadata, requireAdmission: options.requireAdmission === true });
  });
  const results: SettleResult[] = new Array(usages.length);
  for (const round of rounds) {
    for (const [i, result] of (await recordRound(db, round)).entries()) results[round[i]!.index] = result;
  }
  return results;
}

/** Usages of distinct completions: admission check, append, settled mark, one statement each at most. */
async function recordRound(db: Queryable, round: Parsed[]): Promise<SettleResult[]> {
  const found = await db.query<{ n: string; hold_seen: boolean; refused: boolean }>({
    name: "usages-admission-v1",
    text: ADMISSION_SQL,
    values: [round.map((u) => u.data.completionId), round.map((u) => completionStreamId(u.data.completionId))],
  });
  const results: SettleResult[] = round.map(() => ({ recorded: false, releasedMicroChf: null, admission: "pending" }));
  for (const row of found.rows) {
    const i = Number(row.n) - 1;
    results[i]!.admission = row.refused ? "refused" : row.hold_seen || !round[i]!.requireAdmission ? "admitted" : "pending";
  }
  const admitted = round.map((_, i) => i).filter((i) => results[i]!.admission === "admitted");
  const appended: NewStreamOutcome[] = await appendToNewStreams(
    db,
    admitted.map((i) => ({
      streamId: completionStreamId(round[i]!.data.completionId),
      streamType: COMPLETION_STREAM_TYPE,
      events: [{ type: "UsageRecorded", data: round[i]!.data, metadata: { actor: "worker", ...round[i]!.metadata } }],
    })),
  );
  // "already_appended" cannot happen for a new event id; were it to, it counts as recorded, as appendToStream's appended: false did.
  const recorded = admitted.filter((_, k) => appended[k] !== "stream_exists");
  if (recorded.length === 0) return results;
  const settled = await db.query<{ hold_id: string; created: boolean; amount: string }>({
    name: "usages-settle-holds-v1",
    text: SETTLE_HOLDS_SQL,
    values: [
      recorded.map((i) => round[i]!.data.completionId),
      recorded.map((i) => round[i]!.data.accountId),
      recorded.map((i) => billingPeriod(new Date(round[i]!.data.finishedAt)).start),
      recorded.map((i) => round[i]!.data.costMicroChf),
    ],
  });
  const holds = new Map(settled.rows.map((row) => [row.hold_id, row]));
  for (const i of recorded) {
    const hold = holds.get(round[i]!.data.completionId)!;
    results[i] = { recorded: true, releasedMicroChf: hold.created ? null : Number(hold.amount), admission: "admitted" };
  }
  return results;
}

/**
 * $1 hold ids, $2 stream ids (in the same order): for each, numbered from 1, is there a hold (or already
 * the usage), and was the admission refused.
 */
const ADMISSION_SQL = `
SELECT u.n,
       EXISTS (SELECT 1 FROM budget_holds h WHERE h.hold_id = u.hold_id) OR EXISTS (SELECT 1 FROM es_streams s WHERE s.stream_id = u.stream_id) AS hold_seen,
       EXISTS (SELECT 1 FROM refused_holds r WHERE r.hold_id = u.hold_id) AS refused
  FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS u(hold_id, stream_id, n)`;

/**
 * $1 hold ids (distinct), $2 account ids, $3 period starts of finishedAt, $4 costs (micro-CHF). Marks
 * each hold settled with the actual cost, or creates a settled hold of amount 0 when it is gone;
 * `created` says which. In hold id order, so two of these never wait for each other's rows crosswise.
 */
const SETTLE_HOLDS_SQL = `
INSERT INTO budget_holds (hold_id, account_id, period_start, amount_micro_chf, created_at, settled_cost_micro_chf, settled_period, settled_at)
SELECT u.hold_id, u.account_id, u.period, 0, now(), u.cost, u.period, now()
  FROM unnest($1::text[], $2::uuid[], $3::date[], $4::bigint[]) AS u(hold_id, account_id, period, cost)
 ORDER BY u.hold_id
ON CONFLICT (hold_id) DO UPDATE
   SET settled_cost_micro_chf = EXCLUDED.settled_cost_micro_chf,
       settled_period = EXCLUDED.settled_period,
       settled_at = EXCLUDED.settled_at
RETURNING hold_id, (xmax = 0) AS created, amount_micro_chf AS amount`;
