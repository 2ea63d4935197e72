import type { Pool } from "../../db/createPool.ts";
import { withTransaction } from "../../db/withTransaction.ts";
import { appendToStream } from "../eventStore/appendToStream.ts";
import { readStream } from "../eventStore/readStream.ts";
import type { Queryable } from "../eventStore/types.ts";
import type { ModelPrices } from "../pricing/costMicroChf.ts";
import { readPriceVersions } from "../pricing/priceTable.ts";
import { COMPLETION_STREAM_TYPE, completionStreamId, UsageRecordedSchema } from "../usageRecordedEvent.ts";
import type { UsageRefunded } from "../usageRefundedEvent.ts";
import { billingPeriod } from "./billingPeriod.ts";
import { type DeliveredTokens, undeliveredRefund } from "./undeliveredRefund.ts";

/**
 * Notes that the API gave up on a completion's reply for the platform's reason and what its client was
 * sent (-1: nothing; else its completion tokens). Noted twice, the larger figure stands.
 */
export async function noteUndelivered(db: Queryable, completionId: string, delivered: DeliveredTokens): Promise<void> {
  await db.query({
    name: "undelivered-note-v1",
    text: `INSERT INTO undelivered_replies AS u (completion_id, delivered_completion_tokens) VALUES ($1, $2)
           ON CONFLICT (completion_id) DO UPDATE SET delivered_completion_tokens = GREATEST(u.delivered_completion_tokens, EXCLUDED.delivered_completion_tokens)`,
    values: [completionId, Math.max(-1, Math.trunc(delivered))],
  });
}

/** What settling one noted reply did. */
export type UndeliveredOutcome =
  /** A refund was appended and taken off the budget's spend. */
  | { kind: "refunded"; refund: UsageRefunded["data"] }
  /** The charge was within what was sent (the worker heard in time), or the note was dropped: nothing to do. */
  | { kind: "settled" }
  /** Not decidable yet (no usage recorded, or its hold not folded yet): left for the next sweep. */
  | { kind: "waiting" };

/**
 * Settles the noted undelivered replies: each one whose completion has its usage recorded and folded is
 * compared with what its client was sent, and what was charged beyond that is refunded (UsageRefunded,
 * version 2 of `completion-<id>`, and the same cost off `rm_budget.spent_micro_chf` of the charge's
 * billing period, in one transaction with the note's deletion). A note whose completion recorded no
 * usage within `noteMaxAgeMs` (its job charged nothing, or never ran) is dropped. Returns the refunds.
 */
export async function settleUndeliveredReplies(pool: Pool, options: { now: Date; noteMaxAgeMs: number; batchSize?: number }): Promise<UsageRefunded["data"][]> {
  const notes = await pool.query<{ completion_id: string }>("SELECT completion_id FROM undelivered_replies ORDER BY noted_at LIMIT $1", [
    options.batchSize ?? 200,
  ]);
  if (!notes.rowCount) return [];
  const prices = await pricesByVersion(pool);
  const refunds: UsageRefunded["data"][] = [];
  for (const { completion_id } of notes.rows) {
    const outcome = await settleUndeliveredReply(pool, completion_id, { ...options, prices });
    if (outcome.kind === "refunded") refunds.push(outcome.refund);
  }
  return refunds;
}

type PriceLookup = (version: string, model: string) => ModelPrices | null;

async function pricesByVersion(db: Queryable): Promise<PriceLookup> {
  const versions = await readPriceVersions(db);
  return (version, model) => versions.findLast((v) => v.version === version)?.models[model] ?? null;
}

/** settleUndeliveredReplies for one noted completion, in one transaction. */
export async function settleUndeliveredReply(
  pool: Pool,
  completionId: string,
  options: { now: Date; noteMaxAgeMs: number; prices?: PriceLookup },
): Promise<UndeliveredOutcome> {
  const prices = options.prices ?? (await pricesByVersion(pool));
  return withTransaction(pool, async (client) => {
    const note = await client.query<{ delivered: number; noted_at: Date }>(
      "SELECT delivered_completion_tokens AS delivered, noted_at FROM undelivered_replies WHERE completion_id = $1 FOR UPDATE SKIP LOCKED",
      [completionId],
    );
    if (!note.rowCount) return { kind: "settled" };
    const { delivered, noted_at: notedAt } = note.rows[0]!;
    const drop = async (): Promise<UndeliveredOutcome> => {
      await client.query("DELETE FROM undelivered_replies WHERE completion_id = $1", [completionId]);
      return { kind: "settled" };
    };
    // Locked: a settle of the same completion elsewhere waits, and sees the refund once this commits.
    const stream = await readStream(client, completionStreamId(completionId), { lock: true });
    const usageEvent = stream.events.find((e) => e.type === "UsageRecorded");
    if (!usageEvent) return options.now.getTime() - notedAt.getTime() > options.noteMaxAgeMs ? drop() : { kind: "waiting" };
    if (stream.events.some((e) => e.type === "UsageRefunded")) return drop();
    // Until its hold is folded, the charge is not in rm_budget's spend yet: refunded after the fold.
    const hold = await client.query("SELECT 1 FROM budget_holds WHERE hold_id = $1", [completionId]);
    if (hold.rowCount) return { kind: "waiting" };
    const charged = UsageRecordedSchema.parse({ type: usageEvent.type, data: usageEvent.data }).data;
    const refund = undeliveredRefund(charged, delivered, prices(charged.priceTableVersion, charged.model), options.now.toISOString());
    if (!refund) return drop();
    await appendToStream(
      client,
      completionStreamId(completionId),
      COMPLETION_STREAM_TYPE,
      [{ type: "UsageRefunded", data: refund, metadata: { actor: "sweeper" } }],
      stream.version,
    );
    await client.query("UPDATE rm_budget SET spent_micro_chf = spent_micro_chf - $3, updated_at = now() WHERE account_id = $1 AND period_start = $2", [
      refund.accountId,
      billingPeriod(new Date(refund.chargedAt)).start,
      refund.costMicroChf,
    ]);
    await drop();
    return { kind: "refunded", refund };
  });
}
