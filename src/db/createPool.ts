import pg from "pg";

export type Pool = pg.Pool;
export type PoolClient = pg.PoolClient;

export type PoolOptions = {
  /**
   * false: commits on these connections return before their WAL is flushed to disk (PostgreSQL's
   * synchronous_commit=off). Only for state that may be lost in an operating-system crash without harm
   * (budget holds: the sweeper and settle cope with a hold that is gone). Never for events.
   */
  synchronousCommit?: boolean;
};

export function createPool(connectionString: string, max = 10, options: PoolOptions = {}): pg.Pool {
  const pool = new pg.Pool({
    connectionString,
    max,
    ...(options.synchronousCommit === false ? { options: "-c synchronous_commit=off" } : {}),
  });
  // An idle client that errors (server restart) must not crash the process.
  pool.on("error", () => undefined);
  return pool;
}
