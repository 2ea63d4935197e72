/** What a cached, fully authorised key resolves to. */
export type CachedPrincipal = { accountId: string; keyId: string };

export type ApiKeyAuthCacheOptions = {
  /** How long an entry may be served without a database lookup (a safety net: invalidation is pushed). */
  ttlMs: number;
  maxEntries?: number;
  /** Monotonic milliseconds; real time even when the app's clock is faked. */
  nowMs?: () => number;
};

type Entry = { principal: CachedPrincipal; expiresAtMs: number; refreshAtMs: number };

/**
 * Short-lived in-process cache of authorised keys, keyed by the SHA-256 of the secret. Only keys that
 * are active on an account with an active subscription are cached, so anything that grants access
 * (a new key, an activated subscription) takes effect at once; what removes access (revoke, cancel)
 * invalidates the account's entries.
 *
 * A lookup that started before an invalidation must not re-insert what it read: callers take a
 * `generation()` before querying and pass it to `set`, which drops the write if anything was
 * invalidated meanwhile.
 */
export class ApiKeyAuthCache {
  #entries = new Map<string, Entry>();
  #generation = 0;
  readonly #ttlMs: number;
  readonly #maxEntries: number;
  readonly #nowMs: () => number;

  constructor(options: ApiKeyAuthCacheOptions) {
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

  get(keyHash: string): CachedPrincipal | undefined {
    const entry = this.#entries.get(keyHash);
    if (!entry) return undefined;
    if (entry.expiresAtMs <= this.#nowMs()) {
      this.#entries.delete(keyHash);
      return undefined;
    }
    return entry.principal;
  }

  /** Caches the principal unless an invalidation happened since `generationAtLookup`. */
  set(keyHash: string, principal: CachedPrincipal, generationAtLookup: number): void {
    if (this.#ttlMs <= 0 || generationAtLookup !== this.#generation) return;
    if (this.#entries.size >= this.#maxEntries) {
      const oldest = this.#entries.keys().next();
      if (!oldest.done) this.#entries.delete(oldest.value);
    }
    const now = this.#nowMs();
    this.#entries.set(keyHash, { principal, expiresAtMs: now + this.#ttlMs, refreshAtMs: now + this.#ttlMs / 2 });
  }

  /**
   * True once an entry has lived half its TTL: the caller re-reads it in the background (refresh-ahead),
   * so a key in steady use is served from the cache without ever waiting for the database, while the
   * entry still expires at its TTL if the refresh does not confirm it.
   */
  dueForRefresh(keyHash: string): boolean {
    const entry = this.#entries.get(keyHash);
    return entry !== undefined && entry.refreshAtMs <= this.#nowMs();
  }

  /** Drops one entry (a background refresh found the key no longer authorised). */
  delete(keyHash: string): void {
    this.#entries.delete(keyHash);
  }

  invalidateAccount(accountId: string): void {
    this.#generation++;
    for (const [hash, entry] of this.#entries) {
      if (entry.principal.accountId === accountId) this.#entries.delete(hash);
    }
  }

  clear(): void {
    this.#generation++;
    this.#entries.clear();
  }
}
