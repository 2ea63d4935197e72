import type { AppDeps } from "../appDeps.ts";
import { AuthenticationError } from "../http/errors.ts";
import { createSession } from "../sessions/sessionStore.ts";
import type { LoginBody } from "./accountSchemas.ts";
import { passwordHasher } from "./passwordHasher.ts";

export class InvalidCredentialsError extends AuthenticationError {
  constructor() {
    super("Incorrect email address or password.", "invalid_credentials");
  }
}

/**
 * Checks the credentials and opens a session. An unknown email is verified against a dummy hash, so it
 * gets the same answer after about the same work as a wrong password.
 */
export async function loginAccount(deps: Pick<AppDeps, "pool" | "clock" | "config">, body: LoginBody): Promise<{ sessionToken: string; expiresAt: Date }> {
  const found = await deps.pool.query<{ account_id: string; password_hash: string }>(
    `SELECT a.account_id, c.password_hash
     FROM rm_accounts a JOIN account_credentials c USING (account_id)
     WHERE a.email = $1`,
    [body.email],
  );
  const row = found.rows[0];
  const ok = await passwordHasher.verify(body.password, row ? row.password_hash : null);
  if (!row || !ok) throw new InvalidCredentialsError();
  const session = await createSession(deps.pool, row.account_id, deps.clock.now(), deps.config.sessionTtlMs);
  return { sessionToken: session.token, expiresAt: session.expiresAt };
}
