import { createHash } from "node:crypto";
import type { Redis } from "../../redis/createRedis.ts";
import { AttemptLimiter, type RateLimit, TooManyAttemptsError } from "../http/rateLimits.ts";

export type SignInLimits = {
  /** Login attempts on one account from one client address (successes are given back). */
  loginPerAccountAddress: RateLimit;
  /** Login attempts on one account from all addresses: a distributed guessing attack on one account. */
  loginPerAccount: RateLimit;
  /** Login attempts from one client address, all accounts: one client guessing across accounts. */
  loginPerAddress: RateLimit;
  /** Registrations from one client address, whatever their outcome (409 email_taken included). */
  registrationsPerAddress: RateLimit;
};

/** Emails never appear in Redis keys in clear: a short hash is enough to tell accounts apart. */
export const emailKey = (email: string) => createHash("sha256").update(email).digest("base64url").slice(0, 22);

/**
 * Login and registration limits (Redis, shared by all API processes), checked before any password
 * hashing so a refused attempt costs no scrypt work. Over a limit: 429 rate_limit_exceeded with
 * Retry-After and code too_many_login_attempts / too_many_registrations.
 */
export class SignInThrottle {
  readonly #perAccountAddress: AttemptLimiter;
  readonly #perAccount: AttemptLimiter;
  readonly #perAddress: AttemptLimiter;
  readonly #perDevice: AttemptLimiter;
  readonly #registrations: AttemptLimiter;

  constructor(redis: Redis, redisPrefix: string, limits: SignInLimits) {
    this.#perAccountAddress = new AttemptLimiter(redis, `${redisPrefix}:rl:login:account-address`, limits.loginPerAccountAddress);
    this.#perAccount = new AttemptLimiter(redis, `${redisPrefix}:rl:login:account`, limits.loginPerAccount);
    this.#perAddress = new AttemptLimiter(redis, `${redisPrefix}:rl:login:address`, limits.loginPerAddress);
    // A known device (KnownLoginDevices) has the limit of one client on one account, for itself alone.
    this.#perDevice = new AttemptLimiter(redis, `${redisPrefix}:rl:login:device`, limits.loginPerAccountAddress);
    this.#registrations = new AttemptLimiter(redis, `${redisPrefix}:rl:register:address`, limits.registrationsPerAddress);
  }

  /**
   * Counts a login attempt; 429 when this account, this address or both have had too many. A client known
   * to the account (`knownDevice`: the hash of its device token) is counted on its own instead.
   */
  async beforeLogin(email: string, address: string, knownDevice: string | null = null): Promise<void> {
    const account = emailKey(email);
    if (knownDevice !== null) return refuseAfter(await this.#perDevice.consume(knownDevice));
    // The client's own limits first: a client they refuse counts nothing against the account, whose
    // limit holds for every address (a probe's blocked address still took an account past it, and left
    // two new Redis keys per refused attempt).
    refuseAfter(await this.#perAddress.consume(address));
    refuseAfter(await this.#perAccountAddress.consume(`${account}:${address}`));
    refuseAfter(await this.#perAccount.consume(account));
  }

  /** A successful login: its attempt is not held against the account or the address. */
  async afterLoginSuccess(email: string, address: string, knownDevice: string | null = null): Promise<void> {
    const account = emailKey(email);
    if (knownDevice !== null) return this.#perDevice.reset(knownDevice);
    await Promise.all([this.#perAccountAddress.reset(`${account}:${address}`), this.#perAccount.refund(account), this.#perAddress.refund(address)]);
  }

  /**
   * An attempt whose password was never checked (the hashing saturated: 503 too_many_password_checks):
   * it is given back, so that refusals that cost nothing do not bring an address to its limit's lockout.
   */
  async unchecked(email: string, address: string, knownDevice: string | null = null): Promise<void> {
    const account = emailKey(email);
    if (knownDevice !== null) return this.#perDevice.refund(knownDevice);
    await Promise.all([this.#perAccountAddress.refund(`${account}:${address}`), this.#perAccount.refund(account), this.#perAddress.refund(address)]);
  }

  /** Counts a registration attempt from this address; 429 beyond the limit. */
  async beforeRegistration(address: string): Promise<void> {
    const wait = await this.#registrations.consume(address);
    if (wait !== null) {
      throw new TooManyAttemptsError(`Too many registrations from this address. Retry in ${wait} seconds.`, "too_many_registrations", wait);
    }
  }
}

/** 429 too_many_login_attempts when a limit says to wait. */
function refuseAfter(wait: number | null): void {
  if (wait !== null && wait > 0) throw new TooManyAttemptsError(`Too many login attempts. Retry in ${wait} seconds.`, "too_many_login_attempts", wait);
}
