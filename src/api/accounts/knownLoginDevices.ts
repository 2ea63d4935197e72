import { createHash, randomBytes } from "node:crypto";
import type { Redis } from "../../redis/createRedis.ts";

/** How long a browser or client that logged in stays known for its account (renewed at each login). */
export const KNOWN_DEVICE_TTL_SECONDS = 30 * 24 * 3600;

const TOKEN_PATTERN = /^dev_[A-Za-z0-9_-]{32}$/;

/** The hash a device token is kept under (never the token itself). */
export const deviceTokenHash = (token: string) => createHash("sha256").update(token).digest("base64url");

/**
 * Clients that logged in to an account before (OWASP's "device cookies"): each successful login hands its
 * client a random token bound to the account (kept in Redis by its hash only). A login that presents a
 * valid token of its account is limited on its own (per token), not by the address's or the account's
 * limits: an attacker who floods an address or an account with wrong passwords locks out neither a
 * colleague behind the same address nor the account's owner, where they logged in before. Redis away:
 * no token is known (the ordinary limits apply).
 */
export class KnownLoginDevices {
  readonly #redis: Redis;
  readonly #prefix: string;

  constructor(redis: Redis, redisPrefix: string) {
    this.#redis = redis;
    this.#prefix = `${redisPrefix}:login-device`;
  }

  /** Whether `token` was handed out by a login to the account of `accountKey` (and has not expired). */
  async knows(token: string | null, accountKey: string): Promise<boolean> {
    if (token === null || !TOKEN_PATTERN.test(token)) return false;
    try {
      return (await this.#redis.get(`${this.#prefix}:${deviceTokenHash(token)}`)) === accountKey;
    } catch {
      return false;
    }
  }

  /** After a successful login: the client's token (a known one renewed, else a new one); null when Redis is away. */
  async issue(token: string | null, known: boolean, accountKey: string): Promise<string | null> {
    const kept = known && token !== null ? token : `dev_${randomBytes(24).toString("base64url")}`;
    try {
      await this.#redis.set(`${this.#prefix}:${deviceTokenHash(kept)}`, accountKey, "EX", KNOWN_DEVICE_TTL_SECONDS);
      return kept;
    } catch {
      return null;
    }
  }
}
