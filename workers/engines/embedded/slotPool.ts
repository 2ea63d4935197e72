/**
 * A fixed set of reusable slots (context sequences) shared by concurrent jobs. A job beyond the pool size
 * waits for a free slot instead of failing; waiting is abortable.
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

  acquire(signal: AbortSignal): Promise<T> {
    if (this.#closed) return Promise.reject(new Error("The pool is closed"));
    if (signal.aborted) return Promise.reject(abortReason(signal));
    const slot = this.#free.pop();
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

  release(slot: T): void {
    const waiter = this.#waiters.shift();
    if (waiter === undefined) {
      this.#free.push(slot);
      return;
    }
    waiter.signal.removeEventListener("abort", waiter.onAbort);
    waiter.resolve(slot);
  }

  async use<R>(signal: AbortSignal, run: (slot: T) => Promise<R>): Promise<R> {
    const slot = await this.acquire(signal);
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
