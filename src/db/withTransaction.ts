import pg from "pg";
import type { Pool, PoolClient } from "./createPool.ts";
import { isDatabaseUnavailable } from "./databaseUnavailable.ts";

/**
 * Runs `work` in a transaction on one connection: COMMIT when it resolves, ROLLBACK when it throws. A
 * connection that failed without an answer from the server (lost, refused, or silent past the query
 * timeout) is discarded without a ROLLBACK, which would only wait for the same silence again; the
 * server rolls back when the connection closes. So is one whose ROLLBACK fails.
 */
export async function withTransaction<T>(pool: Pool, work: (client: PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await client.query("BEGIN");
    const result = await work(client);
    await client.query("COMMIT");
    return result;
  } catch (error) {
    if (isDatabaseUnavailable(error) && !(error instanceof pg.DatabaseError)) broken = error as Error;
    else await client.query("ROLLBACK").catch((rollbackFailed: unknown) => (broken = rollbackFailed as Error));
    throw error;
  } finally {
    client.release(broken);
  }
}
