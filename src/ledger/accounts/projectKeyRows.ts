import type { AccountEvent } from "./accountEvents.ts";
import type { Queryable } from "../eventStore/types.ts";

/** Inline read model rm_keys: applied in the same transaction as the key events. */
export async function projectKeyRows(db: Queryable, event: AccountEvent): Promise<void> {
  switch (event.type) {
    case "KeyCreated":
      await db.query(
        `INSERT INTO rm_keys (key_id, account_id, name, key_hash, last4, status, created_at)
         VALUES ($1, $2, $3, $4, $5, 'active', $6)`,
        [event.data.keyId, event.data.accountId, event.data.name, event.data.keyHash, event.data.last4, event.data.createdAt],
      );
      return;
    case "KeyRenamed":
      await db.query("UPDATE rm_keys SET name = $2 WHERE key_id = $1", [event.data.keyId, event.data.name]);
      return;
    case "KeyRevoked":
      await db.query("UPDATE rm_keys SET status = 'revoked', revoked_at = $2 WHERE key_id = $1", [event.data.keyId, event.data.revokedAt]);
      return;
    default:
      return;
  }
}
