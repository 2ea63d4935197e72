import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from "rate-limiter-flexible";
import type { Redis } from "../../redis/createRedis.ts";
import { ApiError } from "./errors.ts";

/** `points` attempts per `durationSeconds` window for one key. */
export type RateLimit = { points: number; durationSeconds: number };

/** 429 rate_limit_exceeded with Retry-After: too many attempts from this client or on this account. */
export class TooManyAttemptsError extends ApiError {
  constructor(message: string, code: string, retryAfterSeconds: number) {
    super(429, "rate_limit_exceeded", message, { code, headers: { "retry-after": String(retryAfterSeconds) } });
  }
}

/**
 * A Redis-backed fixed-window counter (rate-limiter-flexible), shared by every API process. When Redis
 * does not answer, an in-process limiter with the same limit takes over, so a Redis outage neither opens
 * the gate wide nor fails the request.
 */
export class AttemptLimiter {
  readonly #limiter: RateLimiterRedis;

  constructor(redis: Redis, keyPrefix: string, limit: RateLimit) {
    this.#limiter = new RateLimiterRedis({
      storeClient: redis,
      keyPrefix,
      points: limit.points,
      duration: limit.durationSeconds,
      // Redis not connected: count in memory at once rather than wait for the command timeout.
      rejectIfRedisNotReady: true,
      insuranceLimiter: new RateLimiterMemory({ points: limit.points, duration: limit.durationSeconds }),
    });
  }

  /** Counts one attempt; the seconds to wait when the limit is exceeded, else null. */
  async consume(key: string): Promise<number | null> {
    return (await this.count(key)).retryAfterSeconds;
  }

  /** Counts one attempt: the attempts counted in this window (this one included) and the seconds to wait when over the limit. */
  async count(key: string): Promise<{ attempts: number; retryAfterSeconds: number | null }> {
    try {
      const res = await this.#limiter.consume(key, 1);
      return { attempts: res.consumedPoints, retryAfterSeconds: null };
    } catch (rejection) {
      if (rejection instanceof RateLimiterRes)
        return { attempts: rejection.consumedPoints, retryAfterSeconds: Math.max(1, Math.ceil(rejection.msBeforeNext / 1000)) };
      throw rejection;
    }
  }

  /** Seconds to wait when the key has used up its limit (counts nothing), else null. */
  async blockedFor(key: string): Promise<number | null> {
    const res = await this.#limiter.get(key).catch(() => null);
    if (!res || res.consumedPoints < this.#limiter.points) return null;
    return Math.max(1, Math.ceil(res.msBeforeNext / 1000));
  }

  /** Gives one attempt back (a successful login is not held against the client). */
  async refund(key: string): Promise<void> {
    await this.#limiter.reward(key, 1).catch(() => undefined);
  }

  /** Forgets the key's count. */
  async reset(key: string): Promise<void> {
    await this.#limiter.delete(key).catch(() => undefined);
  }
}
