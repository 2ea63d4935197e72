import { randomUUID } from "node:crypto";
import type { Pool } from "../../src/db/createPool.ts";
import type { Queryable } from "../../src/ledger/eventStore/types.ts";

/**
 * Moves the server's transaction counter past `target` (transaction ids are server-wide and only grow),
 * so events given explicit transaction ids up to `target` count as committed for every reader. A
 * procedure that commits in a loop: each iteration takes a new id. About 2 s per 100,000 on this machine,
 * and only the first time on a server.
 */
export async function ensureServerTransactionIdsPast(pool: Pool, target: number): Promise<void> {
  await pool.query(`
    CREATE OR REPLACE PROCEDURE test_advance_transaction_ids(target bigint) LANGUAGE plpgsql AS $$
    BEGIN
      WHILE pg_current_xact_id()::text::bigint <= target LOOP
        COMMIT;
      END LOOP;
      COMMIT;
    END $$`);
  await pool.query("SET synchronous_commit = off");
  await pool.query("CALL test_advance_transaction_ids($1)", [target]);
}

export type EventAt = { transactionId: bigint; type: string; data: Record<string, unknown>; streamId?: string };

/**
 * Appends events as if they had been written by the given transactions: the test sets the
 * transaction_id column, which the store otherwise fills with pg_current_xact_id(). Each event gets its
 * own stream unless one is named (versions follow). Global positions follow the order of `events`, not
 * of the transaction ids, as happens when transactions commit out of order.
 */
export async function insertEventsAt(db: Queryable, events: EventAt[]): Promise<void> {
  for (const event of events) {
    const streamId = event.streamId ?? `test-${randomUUID()}`;
    const head = await db.query<{ version: string }>(
      `INSERT INTO es_streams (stream_id, stream_type, version) VALUES ($1, 'test', 1)
       ON CONFLICT (stream_id) DO UPDATE SET version = es_streams.version + 1 RETURNING version`,
      [streamId],
    );
    await db.query(
      `INSERT INTO es_events (stream_id, stream_version, event_id, event_type, data, transaction_id)
       VALUES ($1, $2, $3, $4, $5::jsonb, $6::text::xid8)`,
      [streamId, head.rows[0]!.version, randomUUID(), event.type, JSON.stringify(event.data), event.transactionId.toString()],
    );
  }
}
