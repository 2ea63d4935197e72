import type { Config } from "../../config/config.ts";
import type { Redis } from "../../redis/createRedis.ts";
import type { LoginBody } from "./accountSchemas.ts";
import { FairHashGate, PasswordHashingBusyError } from "./fairHashGate.ts";
import { loginAccount, type LoginDeps } from "./loginAccount.ts";
import { deviceTokenHash, KnownLoginDevices } from "./knownLoginDevices.ts";
import { emailKey, SignInThrottle } from "./signInThrottle.ts";

/** Password checks one client address may have waiting (a NAT'd office signing in at once; round-robin keeps others fair). */
const HASHES_WAITING_PER_ADDRESS = 4;

/**
 * The scrypt work and the attempt limits of one API process, shared by every way in (the account API's
 * login and registration, the console's cookie login): one gate, one set of counters in Redis.
 */
export class SignIn {
  readonly gate: FairHashGate;
  readonly throttle: SignInThrottle;
  readonly devices: KnownLoginDevices;

  constructor(config: Pick<Config, "passwordHashing" | "redisPrefix" | "rateLimits">, redis: Redis) {
    this.gate = new FairHashGate({ ...config.passwordHashing, maxWaitingPerKey: HASHES_WAITING_PER_ADDRESS });
    this.throttle = new SignInThrottle(redis, config.redisPrefix, config.rateLimits);
    this.devices = new KnownLoginDevices(redis, config.redisPrefix);
  }

  /**
   * A login within the limits: 429 over them (before any hashing), 401 for wrong credentials. A client
   * that sends the device token an earlier login of this account gave it has limits (and a place in the
   * hashing queue) of its own, apart from its address's. Answers the session and the client's device
   * token (null when Redis is away).
   */
  async login(
    deps: LoginDeps,
    body: LoginBody,
    clientAddress: string,
    deviceToken: string | null = null,
  ): Promise<{ sessionToken: string; expiresAt: Date; deviceToken: string | null }> {
    const account = emailKey(body.email);
    const known = await this.devices.knows(deviceToken, account);
    const device = known && deviceToken !== null ? deviceTokenHash(deviceToken) : null;
    await this.throttle.beforeLogin(body.email, clientAddress, device);
    const session = await loginAccount(
      deps,
      this.gate,
      body,
      device === null ? { key: clientAddress, knownDevice: false } : { key: device, knownDevice: true },
    ).catch(async (error: unknown) => {
      if (error instanceof PasswordHashingBusyError) await this.throttle.unchecked(body.email, clientAddress, device).catch(() => undefined);
      throw error;
    });
    await this.throttle.afterLoginSuccess(body.email, clientAddress, device);
    return { ...session, deviceToken: await this.devices.issue(deviceToken, known, account) };
  }
}
