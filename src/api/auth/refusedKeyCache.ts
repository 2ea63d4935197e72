import { GenerationalTtlCache, type GenerationalTtlCacheOptions } from "./generationalTtlCache.ts";

export type RefusedKeyCacheOptions = GenerationalTtlCacheOptions;

/**
 * Negative cache of the API-key lookup: key hashes that were unknown or revoked, refused again without a
 * query for a short while. A revoked key never comes back; an unknown hash can only become a key through
 * key creation, an account change whose invalidation clears all of this cache (in this process at once,
 * in the others over Redis), and a lookup that started before an invalidation does not write
 * (generation check). Subscriptions are not cached here: an activation takes effect at once.
 */
export class RefusedKeyCache {
  readonly #cache: GenerationalTtlCache<true>;

  constructor(options: RefusedKeyCacheOptions) {
    this.#cache = new GenerationalTtlCache<true>(options);
  }

  get size(): number {
    return this.#cache.size;
  }

  generation(): number {
    return this.#cache.generation();
  }

  has(keyHash: string): boolean {
    return this.#cache.get(keyHash) === true;
  }

  set(keyHash: string, generationAtLookup: number): void {
    this.#cache.set(keyHash, true, generationAtLookup);
  }

  clear(): void {
    this.#cache.clear();
  }
}
