import type { Clock } from "../../runtime/clock.ts";
import type { Pool } from "../../db/createPool.ts";
import type { Logger } from "../../observability/logger.ts";
import { isDatabaseUnavailable } from "../../db/databaseUnavailable.ts";
import { throttledWarning } from "../../observability/throttledWarning.ts";
import { foldSettledHold } from "./foldSettledHold.ts";
import { releaseHold } from "./releaseHold.ts";
import { settleUndeliveredReplies } from "./undeliveredReplies.ts";

export type HoldSweeperOptions = {
  pool: Pool;
  clock: Clock;
  logger: Logger;
  /**
   * A hold older than this is considered orphaned (its job is gone: the API crashed between hold and
   * enqueue, or the worker died without settling) and is released. It must exceed the longest queue wait
   * plus run time of a job; a job that still settles later is charged normally, its hold simply no
   * longer exists.
   */
  maxHoldAgeMs: number;
  /**
   * A hold settled longer ago than this and still not folded lost its fold (a crash between the two
   * halves of recordUsage) and is folded by the sweeper (default 10 s; a fold normally follows at once).
   */
  settledFoldAfterMs?: number;
  /** How often to sweep; 0 disables the timer (sweepOnce() still works). */
  intervalMs: number;
  /** Holds released per statement batch. */
  batchSize?: number;
  /**
   * Which of some holds' jobs are still queued or running (hold id = completion id = job id), or null when
   * that cannot be told now. An old hold whose job is still there is kept (a background response may wait
   * in line for hours, a long generation run longer than maxHoldAgeMs: released, its account could be
   * admitted past its budget meanwhile); while it cannot be told, old holds are kept. Without it, holds
   * are judged by age alone.
   */
  jobsStillThere?: (holdIds: readonly string[]) => Promise<ReadonlySet<string> | null>;
  /** Told what each sweep did (the projector counts it in its metrics). */
  onSwept?: (swept: { folded: number; released: number; refunded: number }) => void;
};

/** How long the refusal of a speculative admission is kept for its job's settle (a day). */
const REFUSALS_KEPT_MS = 24 * 3600_000;

/**
 * Folds settled holds whose fold was lost (foldSettledHold: the cost is charged), refunds the charges of
 * replies the API gave up on beyond what their clients were sent (settleUndeliveredReplies), and releases unsettled
 * holds whose job is gone: older than maxHoldAgeMs and, when jobsStillThere is given, no longer queued or
 * running (releasing the hold of a job that still runs would not lose money, its settle charges the actual
 * cost, but it would let the account be admitted past its budget meanwhile). Each hold is released by its
 * own statement (releaseHold), so the sweeper never holds locks on several budget rows at once and cannot
 * deadlock with admissions or settles.
 */
export class HoldSweeper {
  readonly #options: HoldSweeperOptions;
  #timer: NodeJS.Timeout | null = null;
  #running: Promise<number> = Promise.resolve(0);

  constructor(options: HoldSweeperOptions) {
    this.#options = options;
  }

  start(): void {
    if (this.#timer || this.#options.intervalMs <= 0) return;
    // PostgreSQL away is a passing outage, retried at the next sweep: a warning, at most once per 10 s;
    // anything else is an error.
    const unavailable = throttledWarning(this.#options.logger, "hold sweep failed: PostgreSQL unavailable, retried at the next sweep");
    this.#timer = setInterval(() => {
      this.#running = this.#running
        .then(() => this.sweepOnce())
        .catch((error: unknown) => {
          if (isDatabaseUnavailable(error)) unavailable({ error: error as Error });
          else this.#options.logger.error("hold sweep failed", { error: error as Error });
          return 0;
        });
    }, this.#options.intervalMs);
    this.#timer.unref();
  }

  async stop(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    await this.#running.catch(() => 0);
  }

  /**
   * Folds every settled hold older than settledFoldAfterMs, then releases every unsettled hold older
   * than maxHoldAgeMs, then settles the noted undelivered replies (a note waits for its usage at most
   * twice maxHoldAgeMs), then deletes refusals of speculative admissions older than a day; returns how
   * many holds were folded or released.
   */
  async sweepOnce(): Promise<number> {
    const { pool, clock, logger, maxHoldAgeMs } = this.#options;
    const now = clock.now().getTime();
    const folded = await this.#each(
      "SELECT hold_id FROM budget_holds WHERE settled_at < $1 ORDER BY settled_at LIMIT $2",
      new Date(now - (this.#options.settledFoldAfterMs ?? 10_000)),
      (holdId) => foldSettledHold(pool, holdId),
    );
    if (folded) logger.warn("folded settled budget holds whose fold was lost", { folded });
    const cutoff = new Date(now - maxHoldAgeMs);
    const released = await this.#releaseOrphans(cutoff);
    if (released) logger.warn("released orphaned budget holds", { released, olderThan: cutoff.toISOString() });
    const refunds = await settleUndeliveredReplies(pool, { now: clock.now(), noteMaxAgeMs: 2 * maxHoldAgeMs });
    for (const refund of refunds) {
      logger.warn("refunded a charge its client was not sent", {
        completionId: refund.completionId,
        accountId: refund.accountId,
        refundedMicroChf: refund.costMicroChf,
        deliveredCompletionTokens: refund.deliveredCompletionTokens,
      });
    }
    // A refusal is looked at only by the settle of its job, which comes when the job ends.
    this.#options.onSwept?.({ folded, released, refunded: refunds.length });
    await pool.query("DELETE FROM refused_holds WHERE refused_at < $1", [new Date(now - REFUSALS_KEPT_MS).toISOString()]);
    return folded + released;
  }

  /**
   * Releases the unsettled holds created before `cutoff` whose job is gone (all of them without
   * jobsStillThere), oldest first, in batches; counts them. Kept holds are passed over (keyset on
   * created_at, hold_id), so a batch full of them does not stop the sweep.
   */
  async #releaseOrphans(cutoff: Date): Promise<number> {
    const { pool, logger, jobsStillThere } = this.#options;
    const batchSize = this.#options.batchSize ?? 500;
    let released = 0;
    let kept = 0;
    let after: { createdAt: string; holdId: string } | null = null;
    for (;;) {
      const batch: { rows: { hold_id: string; created_at: string }[] } = await pool.query<{ hold_id: string; created_at: string }>(
        `SELECT hold_id, created_at::text FROM budget_holds
          WHERE created_at < $1 AND settled_at IS NULL AND ($3::timestamptz IS NULL OR (created_at, hold_id) > ($3::timestamptz, $4::text))
          ORDER BY created_at, hold_id LIMIT $2`,
        [cutoff.toISOString(), batchSize, after?.createdAt ?? null, after?.holdId ?? null],
      );
      const ids = batch.rows.map((row) => row.hold_id);
      const live = jobsStillThere ? await jobsStillThere(ids) : new Set<string>();
      if (live === null) {
        // BullMQ cannot be asked (Redis away): an old hold may be a queued job's; kept until it can be told.
        if (ids.length > 0) logger.warn("old budget holds kept: whether their jobs are still queued or running cannot be told now", { holds: ids.length });
        return released;
      }
      for (const holdId of ids) {
        if (live.has(holdId)) kept++;
        else if ((await releaseHold(pool, holdId)) !== null) released++;
      }
      if (batch.rows.length < batchSize) break;
      const last = batch.rows.at(-1)!;
      after = { createdAt: last.created_at, holdId: last.hold_id };
    }
    if (kept) logger.info("old budget holds kept: their jobs are still queued or running", { kept });
    return released;
  }

  /** Runs `apply` on each hold the query selects, in batches; counts those it changed (non-null). */
  async #each(query: string, before: Date, apply: (holdId: string) => Promise<number | null>): Promise<number> {
    const batchSize = this.#options.batchSize ?? 500;
    let changed = 0;
    for (;;) {
      const batch = await this.#options.pool.query<{ hold_id: string }>(query, [before.toISOString(), batchSize]);
      for (const { hold_id } of batch.rows) {
        if ((await apply(hold_id)) !== null) changed++;
      }
      if (batch.rows.length < batchSize) return changed;
    }
  }
}
