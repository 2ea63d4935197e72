/**
 * One read per key shared by everyone who asks within `shareMs` of when it was issued: the answer is
 * at most that old (plus the read's own round trip). A read that fails is not shared further: the next
 * caller issues a new one.
 */
export class SharedReads<T> {
  readonly #shareMs: number;
  readonly #now: () => number;
  readonly #reads = new Map<string, { issuedAt: number; answer: Promise<T> }>();

  constructor(shareMs: number, now: () => number = () => performance.now()) {
    this.#shareMs = shareMs;
    this.#now = now;
  }

  /** The answer of the read of `key` issued within the last `shareMs`, or of a new one made by `read`. */
  get(key: string, read: () => Promise<T>): Promise<T> {
    return this.share(key, read).answer;
  }

  /**
   * The same, telling whether the answer is the caller's own read (`own`: `read` was called now, so the
   * answer reflects whatever the caller issued before it on the same connection) or one shared with an
   * earlier caller (issued before the caller's own commands: it may not reflect them).
   */
  share(key: string, read: () => Promise<T>): { answer: Promise<T>; own: boolean } {
    const now = this.#now();
    const shared = this.#reads.get(key);
    if (shared && now - shared.issuedAt < this.#shareMs) return { answer: shared.answer, own: false };
    const entry = { issuedAt: now, answer: read() };
    this.#reads.set(key, entry);
    entry.answer.catch(() => {
      if (this.#reads.get(key) === entry) this.#reads.delete(key);
    });
    return { answer: entry.answer, own: true };
  }
}

/** The read `read` starts, a synchronous throw included as its rejection. */
export function attempt<T>(read: () => Promise<T>): Promise<T> {
  try {
    return read();
  } catch (error) {
    return Promise.reject(error);
  }
}
