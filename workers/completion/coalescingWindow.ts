/** A publisher with merged deltas waiting for the worker's next flush. */
export type PendingFlush = {
  /** Writes the pending deltas if its own window has passed; true when nothing is left pending. */
  flushIfDue(): boolean;
};

/**
 * The delta coalescing window of one worker, shared by its publishers: the configured window while few
 * completions stream at once, widening with the number of open streams (base x streams / 16, at most
 * 50 ms), so Redis and the API handle fewer, larger messages exactly when the load is high. The first
 * delta of a completion never waits, whatever the window.
 *
 * It also runs the worker's one flush loop: every base window (while anything is pending) it flushes the
 * pending deltas of ALL due completions in the same event-loop tick, so they reach Redis in one
 * socket write (TurnWriter) instead of one write per completion and token.
 */
export class CoalescingWindow {
  readonly #baseMs: number;
  readonly #maxMs: number;
  readonly #pending = new Set<PendingFlush>();
  #open = 0;
  #timer: NodeJS.Timeout | null = null;

  constructor(baseMs: number, maxMs = 50) {
    this.#baseMs = baseMs;
    this.#maxMs = Math.max(baseMs, maxMs);
  }

  get openStreams(): number {
    return this.#open;
  }

  opened(): void {
    this.#open += 1;
  }

  closed(): void {
    this.#open = Math.max(0, this.#open - 1);
  }

  currentMs(): number {
    if (this.#baseMs === 0) return 0;
    return Math.min(this.#maxMs, this.#baseMs * Math.max(1, this.#open / 16));
  }

  /** Flushes `publisher` on the next tick of the loop at which its window has passed. */
  schedule(publisher: PendingFlush): void {
    this.#pending.add(publisher);
    this.#timer ??= setTimeout(() => this.#tick(), Math.max(1, this.#baseMs));
  }

  /** The publisher flushed by itself (a terminal message, or close). */
  unschedule(publisher: PendingFlush): void {
    this.#pending.delete(publisher);
    if (this.#pending.size || !this.#timer) return;
    clearTimeout(this.#timer);
    this.#timer = null;
  }

  #tick(): void {
    this.#timer = null;
    for (const publisher of this.#pending) if (publisher.flushIfDue()) this.#pending.delete(publisher);
    if (this.#pending.size) this.#timer = setTimeout(() => this.#tick(), Math.max(1, this.#baseMs));
  }
}
