import type { Config } from "../../config/config.ts";
import type { Pool } from "../../db/createPool.ts";
import type { Clock } from "../../runtime/clock.ts";
import { AuthenticationError } from "../http/errors.ts";
import { createSession } from "../sessions/sessionStore.ts";
import type { LoginBody } from "./accountSchemas.ts";
import type { FairHashGate, HashQueue } from "./fairHashGate.ts";
import { passwordHasher } from "./passwordHasher.ts";

export class InvalidCredentialsError extends AuthenticationError {
  constructor() {
    super("Incorrect email address or password.", "invalid_credentials");
  }
}

/**
 * Checks the credentials and opens a session. An unknown email is verified against a dummy hash, so it
 * gets the same answer after about the same work as a wrong password. The hashing runs through the
 * gate (bounded, fair per client address). A hash made with older scrypt parameters is replaced by one
 * with the current parameters after a successful check (only if nobody changed it meanwhile).
 */
/** What a login needs of the API's dependencies. */
export type LoginDeps = { pool: Pool; clock: Clock; config: Config };

export async function loginAccount(
  deps: LoginDeps,
  gate: FairHashGate,
  body: LoginBody,
  hashQueue: HashQueue,
): Promise<{ sessionToken: string; expiresAt: Date }> {
  const found = await deps.pool.query<{ account_id: string; password_hash: string }>(
    `SELECT a.account_id, c.password_hash
     FROM rm_accounts a JOIN account_credentials c USING (account_id)
     WHERE a.email = $1`,
    [body.email],
  );
  const row = found.rows[0];
  const { ok, upgradedHash } = await gate.run(hashQueue, async () => {
    const verified = await passwordHasher.verify(body.password, row ? row.password_hash : null);
    const upgrade = verified && row && passwordHasher.needsRehash(row.password_hash);
    return { ok: verified, upgradedHash: upgrade ? await passwordHasher.hash(body.password) : null };
  });
  if (!row || !ok) throw new InvalidCredentialsError();
  if (upgradedHash) {
    await deps.pool.query("UPDATE account_credentials SET password_hash = $1, updated_at = $2 WHERE account_id = $3 AND password_hash = $4", [
      upgradedHash,
      deps.clock.now(),
      row.account_id,
      row.password_hash,
    ]);
  }
  const session = await createSession(deps.pool, row.account_id, deps.clock.now(), deps.config.sessionTtlMs);
  return { sessionToken: session.token, expiresAt: session.expiresAt };
}
