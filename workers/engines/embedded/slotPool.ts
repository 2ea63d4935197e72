/**
 * A fixed set of reusable slots (context sequences) shared by concurrent jobs. A job beyond the pool size
 * waits for a free slot instead of failing; waiting is abortable. A job may say which free slot suits it
 * best (`prefer`: the highest score wins, e.g. the sequence that already holds the longest prefix of its
 * prompt); a job that waited takes the slot released first.
 */
type Waiter<T> = { resolve: (slot: T) => void; reject: (error: unknown) => void; signal: AbortSignal; onAbort: () => void };

export class SlotPool<T> {
  readonly #free: T[];
  readonly #waiters: Waiter<T>[] = [];
  #closed = false;

  constructor(slots: T[]) {
    this.#free = [...slots];
  }

  get freeSlots(): number {
    return this.#free.length;
  }

  get waiting(): number {
    return this.#waiters.length;
  }

  acquire(signal: AbortSignal, prefer?: (slot: T) => number): Promise<T> {
    if (this.#closed) return Promise.reject(new Error("The pool is closed"));
    if (signal.aborted) return Promise.reject(abortReason(signal));
    const slot = this.#takeFree(prefer);
    if (slot !== undefined) return Promise.resolve(slot);
    return new Promise<T>((resolve, reject) => {
      const waiter: Waiter<T> = {
        resolve,
        reject,
        signal,
        onAbort: () => {
          const index = this.#waiters.indexOf(waiter);
          if (index >= 0) this.#waiters.splice(index, 1);
          reject(abortReason(signal));
        },
      };
      signal.addEventListener("abort", waiter.onAbort, { once: true });
      this.#waiters.push(waiter);
    });
  }

  #takeFree(prefer: ((slot: T) => number) | undefined): T | undefined {
    if (this.#free.length === 0) return undefined;
    // Without a preference, the slot released last (its caches are the warmest).
    let best = this.#free.length - 1;
    if (prefer !== undefined) {
      let bestScore = prefer(this.#free[best]!);
      for (let index = this.#free.length - 2; index >= 0; index -= 1) {
        const score = prefer(this.#free[index]!);
        if (score > bestScore) {
          best = index;
          bestScore = score;
        }
      }
    }
    return this.#free.splice(best, 1)[0];
  }

  release(slot: T): void {
    const waiter = this.#waiters.shift();
    if (waiter === undefined) {
      this.#free.push(slot);
      return;
    }
    waiter.signal.removeEventListener("abort", waiter.onAbort);
    waiter.resolve(slot);
  }

  async use<R>(signal: AbortSignal, run: (slot: T) => Promise<R>, prefer?: (slot: T) => number): Promise<R> {
    const slot = await this.acquire(signal, prefer);
    try {
      return await run(slot);
    } finally {
      this.release(slot);
    }
  }

  /** Rejects every waiting job; slots in use are released normally. */
  close(): void {
    this.#closed = true;
    for (const waiter of this.#waiters.splice(0)) {
      waiter.signal.removeEventListener("abort", waiter.onAbort);
      waiter.reject(new Error("The pool is closed"));
    }
  }
}

export function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException("This operation was aborted", "AbortError");
}
