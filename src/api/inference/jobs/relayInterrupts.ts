/**
 * The relays of an API process's own clients (their jobs started) and the waits for their jobs' start,
 * each with its end, for the shutdown notice (InferenceGateway.interruptRelays): once interruptAll ran,
 * `interrupting` stays set, so a job that starts afterwards is stopped at once. The steps those ends
 * start (the stop of a job whose client was told "Retry it") are kept until done, for the shutdown to
 * wait for (`settled`) before it closes the Redis connections they go out on.
 */
export class RelayInterrupts {
  readonly #relays = new Set<() => void>();
  readonly #waits = new Set<() => void>();
  readonly #steps = new Set<Promise<unknown>>();
  #interrupting = false;

  get interrupting(): boolean {
    return this.#interrupting;
  }

  /** A started job's relay and its interruption; returns what forgets it (at the relay's end). */
  addRelay(interrupt: () => void): () => void {
    this.#relays.add(interrupt);
    return () => this.#relays.delete(interrupt);
  }

  /** A wait for a job's start and its end; returns what forgets it (once the wait is over). */
  addWait(end: () => void): () => void {
    this.#waits.add(end);
    return () => this.#waits.delete(end);
  }

  /** A step an interruption started, waited for by `settled` (its failure is its own: ignored here). */
  track(step: Promise<unknown>): void {
    const kept = step.catch(() => undefined).finally(() => this.#steps.delete(kept));
    this.#steps.add(kept);
  }

  /** Every tracked step done, or `boundMs` passed (Redis away: the shutdown does not wait for ever). */
  async settled(boundMs: number): Promise<void> {
    if (this.#steps.size === 0) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.all(this.#steps),
      new Promise((resolve) => {
        timer = setTimeout(resolve, boundMs);
      }),
    ]).finally(() => clearTimeout(timer));
  }

  /** Ends every relay and wait now; returns how many. */
  interruptAll(): number {
    this.#interrupting = true;
    const ends = [...this.#relays, ...this.#waits];
    this.#relays.clear();
    this.#waits.clear();
    for (const end of ends) end();
    return ends.length;
  }
}
