import type { Pool } from "../../db/createPool.ts";
import { apiKeyHash } from "../keys/apiKeySecret.ts";
import { KeyLastUsedRecorder } from "../keys/keyLastUsedRecorder.ts";
import type { AccountChanges } from "../../ledger/accounts/accountCommandContext.ts";
import type { Redis } from "../../redis/createRedis.ts";
import type { Logger } from "../../observability/logger.ts";
import { ApiKeyAuthCache, type CachedPrincipal } from "./apiKeyAuthCache.ts";
import { AuthInvalidationSubscriber, publishAuthInvalidation } from "../../contracts/authInvalidation.ts";
import { lookupApiKey } from "./lookupApiKey.ts";
import { RefusedKeyCache } from "./refusedKeyCache.ts";

const PUBLISH_TIMEOUT_MS = 1000;

export type ApiKeyAuthOptions = {
  pool: Pool;
  redis: Redis;
  redisPrefix: string;
  logger: Logger;
  /** Safety net only: revocations and subscription changes are pushed (default 2 s). */
  cacheTtlMs?: number;
  /** last_used_at batching (default 1 s). */
  lastUsedFlushIntervalMs?: number;
};

/**
 * `subscription_required`: the key is valid but its account has no active subscription; the principal
 * is given for what needs none (reading, deleting and cancelling the account's own things).
 */
export type ApiKeyAuthResult =
  | { outcome: "authorized"; principal: CachedPrincipal }
  | { outcome: "forbidden" }
  | { outcome: "subscription_required"; principal: CachedPrincipal };

/**
 * Per-API-process key authentication: the cache, its Redis pub/sub invalidation and the last-used
 * batcher, behind one start/stop. Created once per app (never module state) and passed in AppDeps.
 */
export class ApiKeyAuth {
  readonly cache: ApiKeyAuthCache;
  /** Unknown or revoked key hashes, answered again without a query for one cache TTL. */
  readonly refused: RefusedKeyCache;
  readonly lastUsed: KeyLastUsedRecorder;
  readonly #options: ApiKeyAuthOptions;
  readonly #subscriber: AuthInvalidationSubscriber;
  /** Key hashes whose background refresh is in flight (one at a time per key). */
  readonly #refreshing = new Set<string>();
  /** The lookup in flight per key hash, with the cache generation it began in: concurrent misses share it. */
  readonly #lookups = new Map<string, { generation: number; result: Promise<ApiKeyAuthResult> }>();

  constructor(options: ApiKeyAuthOptions) {
    this.#options = options;
    this.cache = new ApiKeyAuthCache({ ttlMs: options.cacheTtlMs ?? 2000 });
    this.refused = new RefusedKeyCache({ ttlMs: options.cacheTtlMs ?? 2000 });
    this.lastUsed = new KeyLastUsedRecorder({
      db: options.pool,
      logger: options.logger,
      flushIntervalMs: options.lastUsedFlushIntervalMs ?? 1000,
    });
    this.#subscriber = new AuthInvalidationSubscriber({
      redis: options.redis,
      redisPrefix: options.redisPrefix,
      logger: options.logger,
      onInvalidate: (message) => {
        this.cache.invalidateAccount(message.accountId);
        this.refused.clear();
      },
      onResync: () => {
        this.cache.clear();
        this.refused.clear();
      },
    });
  }

  /** The answer for a key found in the positive cache, without any lookup; undefined otherwise. */
  cached(secret: string): ApiKeyAuthResult | undefined {
    const keyHash = apiKeyHash(secret);
    const principal = this.cache.get(keyHash);
    if (!principal) return undefined;
    if (this.cache.dueForRefresh(keyHash)) this.#refreshInBackground(keyHash);
    return { outcome: "authorized", principal };
  }

  /** `secret` must already be well-formed (checked without a query by the caller). */
  async authenticate(secret: string): Promise<ApiKeyAuthResult> {
    const keyHash = apiKeyHash(secret);
    const cached = this.cache.get(keyHash);
    if (cached) {
      if (this.cache.dueForRefresh(keyHash)) this.#refreshInBackground(keyHash);
      return { outcome: "authorized", principal: cached };
    }
    if (this.refused.has(keyHash)) return { outcome: "forbidden" };
    // One lookup for the requests that miss together (a burst on a key whose entry expired: each queried,
    // the pool's wait ran past its connect timeout, 503 database_unavailable with PostgreSQL healthy);
    // joined only within the cache generation it began in (a revocation since then is not missed).
    const generation = this.cache.generation();
    const pending = this.#lookups.get(keyHash);
    if (pending && pending.generation === generation) return pending.result;
    const result = this.#lookup(keyHash).finally(() => {
      if (this.#lookups.get(keyHash)?.result === result) this.#lookups.delete(keyHash);
    });
    this.#lookups.set(keyHash, { generation, result });
    return result;
  }

  async #lookup(keyHash: string): Promise<ApiKeyAuthResult> {
    const generation = this.cache.generation();
    const refusedGeneration = this.refused.generation();
    const found = await lookupApiKey(this.#options.pool, keyHash);
    if (!found?.keyActive) {
      // Unknown or revoked: only a new key (an account change, which clears this cache) could change that.
      this.refused.set(keyHash, refusedGeneration);
      return { outcome: "forbidden" };
    }
    const principal = { accountId: found.accountId, keyId: found.keyId, rateLimits: found.rateLimits };
    if (!found.subscriptionActive) return { outcome: "subscription_required", principal };
    this.cache.set(keyHash, principal, generation);
    return { outcome: "authorized", principal };
  }

  /** Re-reads a cached key off the request path: renews it, or drops it when it lost access. */
  #refreshInBackground(keyHash: string): void {
    if (this.#refreshing.has(keyHash)) return;
    this.#refreshing.add(keyHash);
    this.#lookup(keyHash)
      .then((result) => {
        if (result.outcome !== "authorized") this.cache.delete(keyHash);
      })
      .catch((error: unknown) => this.#options.logger.warn("background key refresh failed", { error: error as Error }))
      .finally(() => this.#refreshing.delete(keyHash));
  }

  /**
   * After a change that removes access (key revoked, subscription cancelled) has committed: drops the
   * account's entries here synchronously, then tells every other API process over Redis.
   */
  /** The account-command hook of this process: every committed change drops the account's cached keys everywhere. */
  accountChanges(): AccountChanges {
    return { committed: (accountId) => this.invalidateAccount(accountId) };
  }

  async invalidateAccount(accountId: string): Promise<void> {
    this.cache.invalidateAccount(accountId);
    this.refused.clear();
    let timer: NodeJS.Timeout | undefined;
    try {
      // The change is committed: a Redis outage must not hang the response (commands queue while offline).
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error("publish timed out")), PUBLISH_TIMEOUT_MS);
      });
      await Promise.race([publishAuthInvalidation(this.#options.redis, this.#options.redisPrefix, { accountId }), timeout]);
    } catch (error) {
      this.#options.logger.warn("could not publish auth invalidation; other API processes catch up within the cache TTL", {
        error: error as Error,
        accountId,
      });
    } finally {
      clearTimeout(timer);
    }
  }

  async start(): Promise<void> {
    await this.#subscriber.start();
    this.lastUsed.start();
  }

  async stop(): Promise<void> {
    await this.lastUsed.stop().catch((error: unknown) => this.#options.logger.warn("final last-used flush failed", { error: error as Error }));
    await this.#subscriber.stop();
  }
}
