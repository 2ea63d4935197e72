import type { Config } from "../../config/config.ts";
import type { Redis } from "../../redis/createRedis.ts";
import type { LoginBody } from "./accountSchemas.ts";
import { FairHashGate } from "./fairHashGate.ts";
import { loginAccount, type LoginDeps } from "./loginAccount.ts";
import { SignInThrottle } from "./signInThrottle.ts";

/** Password checks one client address may have waiting (a NAT'd office signing in at once; round-robin keeps others fair). */
const HASHES_WAITING_PER_ADDRESS = 4;

/**
 * The scrypt work and the attempt limits of one API process, shared by every way in (the account API's
 * login and registration, the console's cookie login): one gate, one set of counters in Redis.
 */
export class SignIn {
  readonly gate: FairHashGate;
  readonly throttle: SignInThrottle;

  constructor(config: Pick<Config, "passwordHashing" | "redisPrefix" | "rateLimits">, redis: Redis) {
    this.gate = new FairHashGate({ ...config.passwordHashing, maxWaitingPerKey: HASHES_WAITING_PER_ADDRESS });
    this.throttle = new SignInThrottle(redis, config.redisPrefix, config.rateLimits);
  }

  /** A login within the limits: 429 over them (before any hashing), 401 for wrong credentials. */
  async login(deps: LoginDeps, body: LoginBody, clientAddress: string): Promise<{ sessionToken: string; expiresAt: Date }> {
    await this.throttle.beforeLogin(body.email, clientAddress);
    const session = await loginAccount(deps, this.gate, body, clientAddress);
    await this.throttle.afterLoginSuccess(body.email, clientAddress);
    return session;
  }
}
