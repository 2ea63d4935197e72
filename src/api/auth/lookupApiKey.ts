import { NO_RATE_LIMITS, type RateLimits, RateLimitsSchema } from "../../ledger/accounts/accountEvents.ts";
import type { Queryable } from "../../ledger/eventStore/types.ts";

export type ApiKeyLookup = { accountId: string; keyId: string; keyActive: boolean; subscriptionActive: boolean; rateLimits: RateLimits };

/**
 * rm_keys by SHA-256 of the secret, with the owning account's subscription status and rate limits (read
 * in the same statement: admission needs no query of its own for them; a change of limits is an account
 * change, which drops the account's cached keys in every API process).
 */
export async function lookupApiKey(db: Queryable, keyHash: string): Promise<ApiKeyLookup | null> {
  const result = await db.query<{ key_id: string; account_id: string; status: string; subscription_status: string | null; rate_limits: unknown }>(
    `SELECT k.key_id, k.account_id, k.status, a.subscription_status, a.rate_limits
       FROM rm_keys k LEFT JOIN rm_accounts a ON a.account_id = k.account_id
      WHERE k.key_hash = $1`,
    [keyHash],
  );
  const row = result.rows[0];
  if (!row) return null;
  return {
    accountId: row.account_id,
    keyId: row.key_id,
    keyActive: row.status === "active",
    subscriptionActive: row.subscription_status === "active",
    rateLimits: RateLimitsSchema.safeParse(row.rate_limits).data ?? NO_RATE_LIMITS,
  };
}
