/**
 * The expected wait of a queued job, from what this API process saw: per model, a moving average of the
 * time a job waited per place in line ahead of it (its wait divided by its position when it was queued).
 * Positions already count the scheduling (lanes, fair share), so the estimate does too. No estimate
 * before a job of the model was seen, or once the last one is older than `staleMs`.
 */
export class QueueWaitEstimate {
  readonly #perPlaceMs = new Map<string, { value: number; at: number }>();
  readonly #weight: number;
  readonly #staleMs: number;
  readonly #now: () => number;

  constructor(options: { weight?: number; staleMs?: number; now?: () => number } = {}) {
    this.#weight = options.weight ?? 0.2;
    this.#staleMs = options.staleMs ?? 10 * 60_000;
    this.#now = options.now ?? Date.now;
  }

  /** A job of `model` queued at `position` started after `waitedMs`. */
  observe(model: string, position: number, waitedMs: number): void {
    if (!(position >= 1) || !(waitedMs >= 0)) return;
    const sample = waitedMs / position;
    const now = this.#now();
    const last = this.#perPlaceMs.get(model);
    const value = last && now - last.at <= this.#staleMs ? last.value + this.#weight * (sample - last.value) : sample;
    if (!last && this.#perPlaceMs.size >= 10_000) this.#perPlaceMs.clear();
    this.#perPlaceMs.set(model, { value, at: now });
  }

  /** The expected wait (ms, rounded) of a job queued at `position`, or undefined without a recent observation. */
  expectedMs(model: string, position: number): number | undefined {
    const last = this.#perPlaceMs.get(model);
    if (!last || this.#now() - last.at > this.#staleMs) return undefined;
    return Math.round(last.value * position);
  }
}
