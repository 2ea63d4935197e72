import type { Queryable } from "../../ledger/eventStore/types.ts";
import { newSessionToken, sha256Hex } from "./sessionToken.ts";

export type Session = { accountId: string; expiresAt: Date };

/** Sessions live in a plain table (not domain history), keyed by the token's SHA-256. */
export async function createSession(db: Queryable, accountId: string, now: Date, ttlMs: number): Promise<{ token: string; expiresAt: Date }> {
  const token = newSessionToken();
  const expiresAt = new Date(now.getTime() + ttlMs);
  await db.query("INSERT INTO sessions (token_hash, account_id, created_at, expires_at) VALUES ($1, $2, $3, $4)", [
    sha256Hex(token),
    accountId,
    now,
    expiresAt,
  ]);
  return { token, expiresAt };
}

export async function findSession(db: Queryable, token: string, now: Date): Promise<Session | null> {
  const row = await db.query<{ account_id: string; expires_at: Date }>(
    "SELECT account_id, expires_at FROM sessions WHERE token_hash = $1 AND revoked_at IS NULL AND expires_at > $2",
    [sha256Hex(token), now],
  );
  const found = row.rows[0];
  return found ? { accountId: found.account_id, expiresAt: found.expires_at } : null;
}

export async function revokeSession(db: Queryable, token: string, now: Date): Promise<void> {
  await db.query("UPDATE sessions SET revoked_at = $2 WHERE token_hash = $1 AND revoked_at IS NULL", [sha256Hex(token), now]);
}
