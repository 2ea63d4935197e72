/**
 * The delta coalescing window of one worker, shared by its publishers: the configured window while few
 * completions stream at once, widening with the number of open streams (base x streams / 16, at most
 * 50 ms), so Redis and the API handle fewer, larger messages exactly when the load is high. The first
 * delta of a completion never waits, whatever the window.
 */
export class CoalescingWindow {
  readonly #baseMs: number;
  readonly #maxMs: number;
  #open = 0;

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
}
