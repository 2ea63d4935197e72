import type { Queryable } from "../../ledger/eventStore/types.ts";
import type { Logger } from "../../observability/logger.ts";
import { throttledWarning } from "../../observability/throttledWarning.ts";

export type KeyLastUsedRecorderOptions = {
  db: Queryable;
  logger: Logger;
  /** How often pending uses are written; 0 disables the periodic flush (flush() and stop() still write). */
  flushIntervalMs: number;
};

/**
 * Records when each key was last used without a database write per request: uses are kept in memory
 * (latest time per key) and written in one upsert per flush, every `flushIntervalMs` and on stop.
 * GREATEST keeps the latest time when several API processes write the same key.
 */
export class KeyLastUsedRecorder {
  readonly #options: KeyLastUsedRecorderOptions;
  #pending = new Map<string, Date>();
  #timer: NodeJS.Timeout | null = null;
  #flushing: Promise<number> = Promise.resolve(0);
  #writes = 0;

  constructor(options: KeyLastUsedRecorderOptions) {
    this.#options = options;
  }

  /** Keys waiting for the next flush. */
  get pendingCount(): number {
    return this.#pending.size;
  }

  /** Upsert statements issued so far (one per non-empty flush). */
  get writeCount(): number {
    return this.#writes;
  }

  record(keyId: string, at: Date): void {
    const previous = this.#pending.get(keyId);
    if (!previous || previous < at) this.#pending.set(keyId, at);
  }

  /** Writes everything pending in one statement; flushes never overlap. Returns the rows written. */
  flush(): Promise<number> {
    this.#flushing = this.#flushing.catch(() => 0).then(() => this.#flushPending());
    return this.#flushing;
  }

  start(): void {
    if (this.#timer || this.#options.flushIntervalMs <= 0) return;
    // An outage fails every flush: a line every 10 s with the count of those left out (it was one per flush).
    const warn = throttledWarning(this.#options.logger, "last-used flush failed");
    this.#timer = setInterval(() => {
      this.flush().catch((error: unknown) => warn({ error: error as Error }));
    }, this.#options.flushIntervalMs);
    this.#timer.unref();
  }

  async stop(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    await this.flush();
  }

  async #flushPending(): Promise<number> {
    if (this.#pending.size === 0) return 0;
    const batch = this.#pending;
    this.#pending = new Map();
    const keyIds = [...batch.keys()];
    const times = keyIds.map((id) => batch.get(id)!.toISOString());
    try {
      this.#writes++;
      await this.#options.db.query(
        `INSERT INTO key_last_used (key_id, last_used_at)
         SELECT * FROM unnest($1::uuid[], $2::timestamptz[])
         ON CONFLICT (key_id) DO UPDATE SET last_used_at = GREATEST(key_last_used.last_used_at, EXCLUDED.last_used_at)`,
        [keyIds, times],
      );
      return keyIds.length;
    } catch (error) {
      for (const [keyId, at] of batch) this.record(keyId, at);
      throw error;
    }
  }
}
