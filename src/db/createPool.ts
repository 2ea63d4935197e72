import pg from "pg";
import type { Config } from "../config/config.ts";

export type Pool = pg.Pool;
export type PoolClient = pg.PoolClient;

/**
 * How long a pool waits for PostgreSQL. Without these, a server that silently drops packets makes a
 * connect or a query wait for ever (the TCP stack retries for many minutes).
 */
export type PoolTimeouts = {
  /** Opening a connection, or waiting for a free one when every connection is busy (pg-pool's connectionTimeoutMillis). */
  connectMs: number;
  /** Server side: PostgreSQL cancels a statement running longer (statement_timeout, SQLSTATE 57014); 0 = none. */
  statementMs: number;
  /**
   * Client side: a query without an answer after this long fails and its connection is discarded
   * (pg's query_timeout). Catches a server or network that went silent, which statementMs cannot; kept
   * above statementMs so that a merely slow statement is cancelled cleanly by the server first. 0 = none.
   */
  queryMs: number;
  /** Server side: PostgreSQL ends a session idle inside a transaction this long (its locks are freed); 0 = none. */
  idleInTransactionMs: number;
};

/**
 * Who uses the pool:
 * - `api`: the HTTP request path. Its statements are index lookups and short writes, so a statement
 *   timeout of about a second costs nothing, and a silent server is noticed fast enough to answer 503
 *   within 2 s instead of hanging.
 * - `background`: worker, projector and operator tools, whose statements (settling usage, projection
 *   batches, sweeps) may legitimately take longer, and who retry on their own.
 */
export type PoolUse = "api" | "background";

/** The client-side query timeout for a statement timeout: the server's own cancel comes first. */
function clientBackstopMs(statementMs: number): number {
  if (statementMs === 0) return 0;
  return statementMs + Math.min(5000, Math.max(250, Math.round(statementMs / 2)));
}

/** The timeouts of a pool for `use`, from the configuration (PG_* variables). */
export function poolTimeouts(config: Pick<Config, "postgres">, use: PoolUse): PoolTimeouts {
  const p = config.postgres;
  const statementMs = use === "api" ? p.apiStatementTimeoutMs : p.statementTimeoutMs;
  return { connectMs: p.connectTimeoutMs, statementMs, queryMs: clientBackstopMs(statementMs), idleInTransactionMs: p.idleInTransactionTimeoutMs };
}

/**
 * `timeouts` with the statement timeout lowered to at most `statementMs`, its client-side backstop with
 * it: for a pool whose statements are all short, so that a silent server is noticed within seconds.
 */
export function shortStatements(timeouts: PoolTimeouts, statementMs: number): PoolTimeouts {
  const ms = timeouts.statementMs === 0 ? statementMs : Math.min(timeouts.statementMs, statementMs);
  return { ...timeouts, statementMs: ms, queryMs: clientBackstopMs(ms) };
}

/** The configuration's defaults for background use: pools created without timeouts (tests, tools) get these. */
export const DEFAULT_POOL_TIMEOUTS: PoolTimeouts = { connectMs: 1500, statementMs: 30_000, queryMs: clientBackstopMs(30_000), idleInTransactionMs: 10_000 };

/** Idle connections are probed after this long, so a peer that vanished is noticed by the OS. */
const KEEPALIVE_INITIAL_DELAY_MS = 10_000;

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
  /** Default: DEFAULT_POOL_TIMEOUTS. Roles pass poolTimeouts(config, use). */
  timeouts?: PoolTimeouts;
  /**
   * Told when one of the pool's connections is lost (terminated by the server, reset by the network),
   * whether idle in the pool or checked out; for a log line. The loss itself is handled either way.
   */
  onConnectionLost?: (error: Error) => void;
};

export function createPool(connectionString: string, max = 10, options: PoolOptions = {}): pg.Pool {
  const t = options.timeouts ?? DEFAULT_POOL_TIMEOUTS;
  const pool = new pg.Pool({
    connectionString,
    max,
    min: Math.min(options.keepOpen ?? 2, max),
    ...(options.idleTimeoutMs !== undefined ? { idleTimeoutMillis: options.idleTimeoutMs } : {}),
    ...(options.synchronousCommit === false ? { options: "-c synchronous_commit=off" } : {}),
    connectionTimeoutMillis: t.connectMs,
    ...(t.statementMs > 0 ? { statement_timeout: t.statementMs } : {}),
    ...(t.queryMs > 0 ? { query_timeout: t.queryMs } : {}),
    ...(t.idleInTransactionMs > 0 ? { idle_in_transaction_session_timeout: t.idleInTransactionMs } : {}),
    keepAlive: true,
    keepAliveInitialDelayMillis: KEEPALIVE_INITIAL_DELAY_MS,
  });
  const lost = options.onConnectionLost ?? (() => undefined);
  // A connection that drops emits 'error' on its client; an EventEmitter without an 'error' listener
  // throws, which kills the process. pg-pool listens only while a client is idle in the pool (and then
  // re-emits on the pool, hence the pool's listener); a checked-out client, between two statements or
  // in the middle of one, has none. So every client gets a listener of its own, once, when it connects.
  // Nothing else is needed: the statement running fails with the connection error (pg rejects every
  // pending query first), a later one fails with "not queryable", and release() discards a client that
  // is no longer queryable instead of returning it to the pool.
  pool.on("connect", (client) => {
    client.on("error", (error: Error) => lost(error));
  });
  // pg-pool's re-emit of an idle client's error: already reported by the client's own listener.
  pool.on("error", () => undefined);
  return pool;
}
