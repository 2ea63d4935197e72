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

/** A session's last use is written at most this often (its idle timeout is that much less exact). */
const LAST_SEEN_EVERY_MS = 60_000;

/**
 * The live session of a token: not revoked, within its lifetime and, with `idleMs` (> 0), used within the
 * last `idleMs`. Its use is noted (at most once a minute, without waiting for the write: a failed one
 * only leaves the last use older).
 */
export async function findSession(db: Queryable, token: string, now: Date, idleMs = 0): Promise<Session | null> {
  const hash = sha256Hex(token);
  const row = await db.query<{ account_id: string; expires_at: Date; last_seen_at: Date }>(
    `SELECT account_id, expires_at, COALESCE(last_seen_at, created_at) AS last_seen_at FROM sessions
      WHERE token_hash = $1 AND revoked_at IS NULL AND expires_at > $2 AND ($3::bigint = 0 OR COALESCE(last_seen_at, created_at) > $2 - make_interval(secs => $3::bigint / 1000.0))`,
    [hash, now, idleMs],
  );
  const found = row.rows[0];
  if (!found) return null;
  if (idleMs > 0 && now.getTime() - found.last_seen_at.getTime() >= LAST_SEEN_EVERY_MS) {
    db.query("UPDATE sessions SET last_seen_at = $2 WHERE token_hash = $1 AND (last_seen_at IS NULL OR last_seen_at < $2)", [hash, now]).catch(() => undefined);
  }
  return { accountId: found.account_id, expiresAt: found.expires_at };
}

export async function revokeSession(db: Queryable, token: string, now: Date): Promise<void> {
  await db.query("UPDATE sessions SET revoked_at = $2 WHERE token_hash = $1 AND revoked_at IS NULL", [sha256Hex(token), now]);
}
