export type GenerationalTtlCacheOptions = {
  /** How long an entry may be served without a database lookup. */
  ttlMs: number;
  maxEntries?: number;
  /** Monotonic milliseconds; real time even when the app's clock is faked. */
  nowMs?: () => number;
};

type Entry<V> = { value: V; expiresAtMs: number; refreshAtMs: number };

/**
 * An in-process cache keyed by the SHA-256 of a secret, whose entries expire after a TTL, with at most
 * `maxEntries` (the oldest dropped first). A lookup that started before an invalidation must not
 * re-insert what it read: callers take a `generation()` before querying and pass it to `set`, which
 * drops the write if anything was invalidated meanwhile.
 */
export class GenerationalTtlCache<V> {
  readonly #entries = new Map<string, Entry<V>>();
  #generation = 0;
  readonly #ttlMs: number;
  readonly #maxEntries: number;
  protected readonly nowMs: () => number;

  constructor(options: GenerationalTtlCacheOptions) {
    this.#ttlMs = options.ttlMs;
    this.#maxEntries = options.maxEntries ?? 10_000;
    this.nowMs = options.nowMs ?? (() => performance.now());
  }

  get size(): number {
    return this.#entries.size;
  }

  generation(): number {
    return this.#generation;
  }

  get(keyHash: string): V | undefined {
    const entry = this.#entries.get(keyHash);
    if (!entry) return undefined;
    if (entry.expiresAtMs <= this.nowMs()) {
      this.#entries.delete(keyHash);
      return undefined;
    }
    return entry.value;
  }

  /** Caches `value` unless an invalidation happened since `generationAtLookup`. */
  set(keyHash: string, value: V, generationAtLookup: number): void {
    if (this.#ttlMs <= 0 || generationAtLookup !== this.#generation) return;
    if (this.#entries.size >= this.#maxEntries) {
      const oldest = this.#entries.keys().next();
      if (!oldest.done) this.#entries.delete(oldest.value);
    }
    const now = this.nowMs();
    this.#entries.set(keyHash, { value, expiresAtMs: now + this.#ttlMs, refreshAtMs: now + this.#ttlMs / 2 });
  }

  /** True once an entry has lived half its TTL (for a refresh-ahead). */
  protected halfLived(keyHash: string): boolean {
    const entry = this.#entries.get(keyHash);
    return entry !== undefined && entry.refreshAtMs <= this.nowMs();
  }

  /** Drops one entry. */
  delete(keyHash: string): void {
    this.#entries.delete(keyHash);
  }

  /** Drops every entry whose value matches (a new generation: lookups under way do not write). */
  protected invalidateWhere(matches: (value: V) => boolean): void {
    this.#generation++;
    for (const [hash, entry] of this.#entries) {
      if (matches(entry.value)) this.#entries.delete(hash);
    }
  }

  clear(): void {
    this.#generation++;
    this.#entries.clear();
  }
}
