export type RefusedKeyCacheOptions = {
  /** How long a refusal is answered without a database lookup. */
  ttlMs: number;
  maxEntries?: number;
  /** Monotonic milliseconds. */
  nowMs?: () => number;
};

/**
 * Negative cache of the API-key lookup: key hashes that were unknown or revoked, refused again without a
 * query for a short while. A revoked key never comes back; an unknown hash can only become a key through
 * key creation, an account change whose invalidation clears all of this cache (in this process at once,
 * in the others over Redis), and a lookup that started before an invalidation does not write
 * (generation check). Subscriptions are not cached here: an activation takes effect at once.
 */
export class RefusedKeyCache {
  /** Key hash -> expiry (monotonic ms). */
  readonly #entries = new Map<string, number>();
  #generation = 0;
  readonly #ttlMs: number;
  readonly #maxEntries: number;
  readonly #nowMs: () => number;

  constructor(options: RefusedKeyCacheOptions) {
    this.#ttlMs = options.ttlMs;
    this.#maxEntries = options.maxEntries ?? 10_000;
    this.#nowMs = options.nowMs ?? (() => performance.now());
  }

  get size(): number {
    return this.#entries.size;
  }

  generation(): number {
    return this.#generation;
  }

  has(keyHash: string): boolean {
    const expiresAtMs = this.#entries.get(keyHash);
    if (expiresAtMs === undefined) return false;
    if (expiresAtMs <= this.#nowMs()) {
      this.#entries.delete(keyHash);
      return false;
    }
    return true;
  }

  set(keyHash: string, generationAtLookup: number): void {
    if (this.#ttlMs <= 0 || generationAtLookup !== this.#generation) return;
    if (this.#entries.size >= this.#maxEntries) {
      const oldest = this.#entries.keys().next();
      if (!oldest.done) this.#entries.delete(oldest.value);
    }
    this.#entries.set(keyHash, this.#nowMs() + this.#ttlMs);
  }

  clear(): void {
    this.#generation += 1;
    this.#entries.clear();
  }
}
