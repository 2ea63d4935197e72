import { LOG_START, type LogPosition } from "../src/ledger/eventStore/logPosition.ts";
import type { Queryable } from "../src/ledger/eventStore/types.ts";

/** The log position a projection has applied up to (LOG_START if it never ran). */
export async function readCheckpoint(db: Queryable, projection: string): Promise<LogPosition> {
  const r = await db.query<{ transaction_id_text: string; global_position_text: string }>(
    "SELECT transaction_id::text AS transaction_id_text, global_position::text AS global_position_text FROM es_checkpoints WHERE projection = $1",
    [projection],
  );
  const row = r.rows[0];
  return row ? { transactionId: row.transaction_id_text, globalPosition: row.global_position_text } : LOG_START;
}

/**
 * Moves the checkpoint from `from` to `to` (compare-and-set), inside the transaction that applied the
 * events. Returns false when the checkpoint is no longer at `from` (another instance got there first):
 * the caller must roll back, so no event is ever applied twice.
 */
export async function advanceCheckpoint(db: Queryable, projection: string, from: LogPosition, to: LogPosition): Promise<boolean> {
  const r = await db.query(
    `INSERT INTO es_checkpoints AS c (projection, transaction_id, global_position, updated_at)
     VALUES ($1, $2::xid8, $3::bigint, now())
     ON CONFLICT (projection) DO UPDATE
        SET transaction_id = EXCLUDED.transaction_id, global_position = EXCLUDED.global_position, updated_at = EXCLUDED.updated_at
      WHERE c.transaction_id = $4::xid8 AND c.global_position = $5::bigint`,
    [projection, to.transactionId, to.globalPosition, from.transactionId, from.globalPosition],
  );
  return r.rowCount === 1;
}
