import { ApiError } from "../http/errors.ts";

export type FairHashGateOptions = {
  /** Password hashes computed at once (each takes one libuv thread-pool thread and 128 MiB for ~0.3 s). */
  concurrency: number;
  /** Hashes of one client address that may wait for a slot; more are refused at once. */
  maxWaitingPerKey: number;
  /**
   * Hashes that may wait in all, counted apart for clients from an address and for known devices
   * (logins that sent back the device token of an earlier login of their account); more are refused at once.
   */
  maxWaiting: number;
};

/** Where a hash waits: a client address's queue, or a known device's (see FairHashGate). */
export type HashQueue = { key: string; knownDevice: boolean };

/** 503 with Retry-After: the password hashing of this API process is saturated. */
export class PasswordHashingBusyError extends ApiError {
  constructor() {
    super(503, "service_unavailable", "Too many sign-in attempts are being processed right now. Retry after a short delay.", {
      code: "too_many_password_checks",
      headers: { "retry-after": "1" },
    });
  }
}

/**
 * Bounds the scrypt work of one API process: at most `concurrency` hashes run at once, so the thread pool
 * that DNS, file and crypto calls share is never filled by password checks; the waiting ones are served
 * round-robin per client address, so a burst from one address delays another address's login by at most
 * one hash per address ahead of it; beyond the waiting limits a request is refused at once (503), never
 * queued for seconds. A known device's login waits in a queue of its own, under a total of its own: a
 * flood from any number of addresses, which fills the addresses' total, refuses none of them (each
 * waits its turn in the round-robin).
 */
export class FairHashGate {
  readonly #options: FairHashGateOptions;
  #running = 0;
  /** Waiting hashes of addresses and of known devices, each under its own `maxWaiting`. */
  readonly #waitingTotal = { address: 0, device: 0 };
  /** Waiters per key; Map order is the round-robin order (a served key moves to the end). */
  readonly #waiting = new Map<string, Array<() => void>>();

  constructor(options: FairHashGateOptions) {
    this.#options = options;
  }

  async run<T>(queueOf: HashQueue, task: () => Promise<T>): Promise<T> {
    const pool = queueOf.knownDevice ? "device" : "address";
    // A device's key cannot be an address's (an address holds no ':' prefix of this kind).
    const key = queueOf.knownDevice ? `device:${queueOf.key}` : queueOf.key;
    if (this.#running < this.#options.concurrency && this.#waiting.size === 0) {
      this.#running += 1;
    } else {
      const queue = this.#waiting.get(key) ?? [];
      if (queue.length >= this.#options.maxWaitingPerKey || this.#waitingTotal[pool] >= this.#options.maxWaiting) throw new PasswordHashingBusyError();
      // The slot is handed over by #release (#running stays counted).
      await new Promise<void>((resolve) => {
        queue.push(() => {
          this.#waitingTotal[pool] -= 1;
          resolve();
        });
        this.#waiting.set(key, queue);
        this.#waitingTotal[pool] += 1;
      });
    }
    try {
      return await task();
    } finally {
      this.#release();
    }
  }

  #release(): void {
    const next = this.#waiting.entries().next();
    if (next.done) {
      this.#running -= 1;
      return;
    }
    const [key, queue] = next.value;
    const resolve = queue.shift()!;
    this.#waiting.delete(key);
    if (queue.length > 0) this.#waiting.set(key, queue);
    resolve();
  }
}
