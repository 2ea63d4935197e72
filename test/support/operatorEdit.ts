import type { Pool, PoolClient } from "../../src/db/createPool.ts";

/**
 * Runs `edit` in one transaction with the append-only triggers of es_events disabled, as the operator
 * procedure of docs/audit.md does (the table owner only): tests use it to tamper with the log or reset it.
 */
export async function operatorEdit<T>(pool: Pool, edit: (client: PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    await client.query("ALTER TABLE es_events DISABLE TRIGGER es_events_no_update_delete, DISABLE TRIGGER es_events_no_truncate");
    const result = await edit(client);
    await client.query("ALTER TABLE es_events ENABLE TRIGGER es_events_no_update_delete, ENABLE TRIGGER es_events_no_truncate");
    await client.query("COMMIT");
    return result;
  } catch (error) {
    await client.query("ROLLBACK");
    throw error;
  } finally {
    client.release();
  }
}
