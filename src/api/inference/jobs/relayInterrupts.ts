/**
 * The relays of an API process's own clients (their jobs started) and the waits for their jobs' start,
 * each with its end, for the shutdown notice (InferenceGateway.interruptRelays): once interruptAll ran,
 * `interrupting` stays set, so a job that starts afterwards is stopped at once.
 */
export class RelayInterrupts {
  readonly #relays = new Set<() => void>();
  readonly #waits = new Set<() => void>();
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
