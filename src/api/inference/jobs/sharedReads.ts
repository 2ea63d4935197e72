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
    const now = this.#now();
    const shared = this.#reads.get(key);
    if (shared && now - shared.issuedAt < this.#shareMs) return shared.answer;
    const entry = { issuedAt: now, answer: read() };
    this.#reads.set(key, entry);
    entry.answer.catch(() => {
      if (this.#reads.get(key) === entry) this.#reads.delete(key);
    });
    return entry.answer;
  }
}
