import type { Queryable } from "../../ledger/eventStore/types.ts";

/** One row of rm_keys with its batched last use. */
export type KeyRow = {
  keyId: string;
  accountId: string;
  name: string;
  last4: string;
  status: "active" | "revoked";
  createdAt: Date;
  revokedAt: Date | null;
  lastUsedAt: Date | null;
};

type Row = {
  key_id: string;
  account_id: string;
  name: string;
  last4: string;
  status: "active" | "revoked";
  created_at: Date;
  revoked_at: Date | null;
  last_used_at: Date | null;
};

const SELECT_KEYS = `SELECT k.key_id, k.account_id, k.name, k.last4, k.status, k.created_at, k.revoked_at, u.last_used_at
  FROM rm_keys k LEFT JOIN key_last_used u ON u.key_id = k.key_id`;

function fromRow(row: Row): KeyRow {
  return {
    keyId: row.key_id,
    accountId: row.account_id,
    name: row.name,
    last4: row.last4,
    status: row.status,
    createdAt: row.created_at,
    revokedAt: row.revoked_at,
    lastUsedAt: row.last_used_at,
  };
}

/**
 * The account's keys (active and revoked), oldest first; or one of them. A key of another account
 * is simply not found. `keyId` must already be a valid uuid.
 */
export async function findKeyRows(db: Queryable, accountId: string, keyId?: string): Promise<KeyRow[]> {
  const result =
    keyId === undefined
      ? await db.query<Row>(`${SELECT_KEYS} WHERE k.account_id = $1 ORDER BY k.created_at, k.key_id`, [accountId])
      : await db.query<Row>(`${SELECT_KEYS} WHERE k.account_id = $1 AND k.key_id = $2`, [accountId, keyId]);
  return result.rows.map(fromRow);
}
