import type { Clock } from "../../clock.ts";
import type { Pool } from "../../db/createPool.ts";
import type { Logger } from "../../observability/logger.ts";
import { releaseHold } from "./releaseHold.ts";

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
  /** How often to sweep; 0 disables the timer (sweepOnce() still works). */
  intervalMs: number;
  /** Holds released per statement batch. */
  batchSize?: number;
};

/**
 * Releases holds whose job is gone, judged by age only (simple and safe: no coupling to BullMQ's job
 * storage, and releasing a hold never loses money: the settle of a late job still charges the actual
 * cost). Each hold is released by its own statement (releaseHold), so the sweeper never holds locks on
 * several budget rows at once and cannot deadlock with admissions or settles.
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
    this.#timer = setInterval(() => {
      this.#running = this.#running.then(() => this.sweepOnce()).catch((error: unknown) => {
        this.#options.logger.error("hold sweep failed", { error: error as Error });
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

  /** Releases every hold older than maxHoldAgeMs; returns how many were released. */
  async sweepOnce(): Promise<number> {
    const { pool, clock, logger, maxHoldAgeMs } = this.#options;
    const cutoff = new Date(clock.now().getTime() - maxHoldAgeMs);
    const batchSize = this.#options.batchSize ?? 500;
    let released = 0;
    for (;;) {
      const expired = await pool.query<{ hold_id: string }>(
        "SELECT hold_id FROM budget_holds WHERE created_at < $1 ORDER BY created_at LIMIT $2",
        [cutoff.toISOString(), batchSize],
      );
      for (const { hold_id } of expired.rows) {
        if ((await releaseHold(pool, hold_id)) !== null) released++;
      }
      if (expired.rows.length < batchSize) break;
    }
    if (released) logger.warn("released orphaned budget holds", { released, olderThan: cutoff.toISOString() });
    return released;
  }
}
