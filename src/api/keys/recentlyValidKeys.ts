import type { Redis } from "../../redis/createRedis.ts";
import { apiKeyHash } from "./apiKeySecret.ts";

/** How long a key that authenticated counts as recently valid. */
const RECENTLY_VALID_SECONDS = 7 * 86_400;

/**
 * API keys that authenticated in the last days, by a part of their hash (never the key), in Redis so
 * every API process knows them: an address blocked for sending made-up keys (an office behind one NAT
 * where one machine misbehaves) still gets its colleagues' keys looked up, while a key never seen valid
 * is refused there without a query. Written once per lookup (a cache miss, about every two seconds per
 * key and process), not per request, and when a key is created (valid from its first request on, also
 * from an address where someone is trying made-up keys).
 */
export class RecentlyValidKeys {
  readonly #redis: Redis;
  readonly #prefix: string;

  constructor(redis: Redis, prefix: string) {
    this.#redis = redis;
    this.#prefix = prefix;
  }

  #key(secret: string): string {
    return `${this.#prefix}:${apiKeyHash(secret).slice(0, 32)}`;
  }

  /** Whether the key authenticated recently (false when Redis does not answer: the block stands). */
  async has(secret: string): Promise<boolean> {
    return (await this.#redis.exists(this.#key(secret)).catch(() => 0)) === 1;
  }

  /** Records that the key authenticated (in the background: a failure only loses the mark). */
  mark(secret: string): void {
    this.#redis.set(this.#key(secret), "1", "EX", RECENTLY_VALID_SECONDS).catch(() => undefined);
  }
}

/** The platform's recently valid keys, under its Redis prefix (the key check reads them; key creation marks a new key). */
export function recentlyValidKeysOf(deps: { redis: Redis; config: { redisPrefix: string } }): RecentlyValidKeys {
  return new RecentlyValidKeys(deps.redis, `${deps.config.redisPrefix}:auth:recently-valid`);
}
