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
  /** How long a connection above `keepOpen` may stay idle before it is closed (pg's default: 10 s). */
  idleTimeoutMs?: number;
  /**
   * Connections kept open however long they are idle (default 2, at most `max`): the first request
   * after a quiet spell does not wait for a new PostgreSQL connection (a backend process started and
   * authenticated; measured up to hundreds of ms on the development VM, where it set the bench's
   * 1-stream p99: each round started after the pool had closed its idle connections).
   */
  keepOpen?: number;
};

export function createPool(connectionString: string, max = 10, options: PoolOptions = {}): pg.Pool {
  const pool = new pg.Pool({
    connectionString,
    max,
    min: Math.min(options.keepOpen ?? 2, max),
    ...(options.idleTimeoutMs !== undefined ? { idleTimeoutMillis: options.idleTimeoutMs } : {}),
    ...(options.synchronousCommit === false ? { options: "-c synchronous_commit=off" } : {}),
  });
  // An idle client that errors (server restart) must not crash the process.
  pool.on("error", () => undefined);
  return pool;
}
