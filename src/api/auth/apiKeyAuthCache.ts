import type { RateLimits } from "../../ledger/accounts/accountEvents.ts";
import { GenerationalTtlCache, type GenerationalTtlCacheOptions } from "./generationalTtlCache.ts";

/** What a cached, fully authorised key resolves to (with its account's subscription rate limits). */
export type CachedPrincipal = { accountId: string; keyId: string; rateLimits: RateLimits };

export type ApiKeyAuthCacheOptions = GenerationalTtlCacheOptions;

/**
 * Short-lived in-process cache of authorised keys, keyed by the SHA-256 of the secret. Only keys that
 * are active on an account with an active subscription are cached, so anything that grants access
 * (a new key, an activated subscription) takes effect at once; what removes access (revoke, cancel)
 * invalidates the account's entries.
 */
export class ApiKeyAuthCache extends GenerationalTtlCache<CachedPrincipal> {
  /**
   * True once an entry has lived half its TTL: the caller re-reads it in the background (refresh-ahead),
   * so a key in steady use is served from the cache without ever waiting for the database, while the
   * entry still expires at its TTL if the refresh does not confirm it.
   */
  dueForRefresh(keyHash: string): boolean {
    return this.halfLived(keyHash);
  }

  invalidateAccount(accountId: string): void {
    this.invalidateWhere((principal) => principal.accountId === accountId);
  }
}
