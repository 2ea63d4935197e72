import { Redis, type RedisOptions } from "ioredis";
import type { Config } from "../config/config.ts";

export type { Redis };

export type RedisTimeouts = Config["redisTimeouts"];

/** The configuration's defaults (REDIS_CONNECT_TIMEOUT_MS, REDIS_COMMAND_TIMEOUT_MS). */
export const DEFAULT_REDIS_TIMEOUTS: RedisTimeouts = { connectTimeoutMs: 1000, commandTimeoutMs: 1000 };

/**
 * What a connection is for; each kind behaves differently while Redis is away:
 *
 * - `fail-fast`: commands on the HTTP request path (BullMQ Queue producer, worker presence, replay
 *   reads, publishes). Once connected, a command issued while the connection is down fails at once
 *   (no offline queue, BullMQ's advice for producers behind an API), a command in flight when it drops
 *   fails at once (maxRetriesPerRequest 0: never re-sent later, so a job the client was told failed is
 *   never queued behind its back), and a command without an answer fails after commandTimeoutMs.
 *   Before the first connection, commands wait in the offline queue (bounded by the same timeout), so
 *   a connection can be used right after it is created.
 * - `subscriber`: pub/sub. Waits for the connection and re-subscribes after every reconnection, for ever.
 * - `worker`: BullMQ Worker connections and the worker's own commands (heartbeat, token stream). BullMQ
 *   requires maxRetriesPerRequest null for a Worker's blocking connection; commands wait for Redis to
 *   come back instead of failing a running job.
 *
 * Every kind reconnects for ever, at most a second apart, so service resumes within about a second of
 * Redis coming back.
 */
export type RedisKind = "fail-fast" | "subscriber" | "worker";

export type CreateRedisOptions = { kind: RedisKind; timeouts?: RedisTimeouts; lazyConnect?: boolean };

const reconnectDelay = (attempt: number): number => Math.min(attempt * 100, 1000);

/** The ioredis options of a kind (also for `duplicate()` of a connection of another kind). */
export function redisOptions(kind: RedisKind, timeouts: RedisTimeouts = DEFAULT_REDIS_TIMEOUTS): RedisOptions {
  const common: RedisOptions = { enableReadyCheck: true, connectTimeout: timeouts.connectTimeoutMs, retryStrategy: reconnectDelay };
  if (kind === "fail-fast") {
    return { ...common, maxRetriesPerRequest: 0, enableOfflineQueue: true, commandTimeout: timeouts.commandTimeoutMs, autoResendUnfulfilledCommands: false };
  }
  return { ...common, maxRetriesPerRequest: null, enableOfflineQueue: true, commandTimeout: undefined, autoResendUnfulfilledCommands: true };
}

export function createRedis(url: string, options: CreateRedisOptions): Redis {
  return prepared(new Redis(url, { ...redisOptions(options.kind, options.timeouts), lazyConnect: options.lazyConnect ?? false }), options.kind);
}

/** A new connection to the same server as `redis`, of another kind, with the same timeouts (e.g. a subscriber next to commands). */
export function duplicateAs(redis: Redis, kind: RedisKind): Redis {
  const timeouts: RedisTimeouts = {
    connectTimeoutMs: redis.options.connectTimeout ?? DEFAULT_REDIS_TIMEOUTS.connectTimeoutMs,
    commandTimeoutMs: redis.options.commandTimeout ?? DEFAULT_REDIS_TIMEOUTS.commandTimeoutMs,
  };
  return prepared(redis.duplicate({ ...redisOptions(kind, timeouts), lazyConnect: false }), kind);
}

/** Connections made here that have been up at least once. */
const connectedOnce = new WeakSet<Redis>();

/**
 * True while a connection that was up is down (Redis away, reconnecting). False before its first
 * connection: at start-up, commands wait for it (bounded by the command timeout on fail-fast connections).
 */
export function redisAway(redis: Redis): boolean {
  return connectedOnce.has(redis) && redis.status !== "ready";
}

function prepared(redis: Redis, kind: RedisKind): Redis {
  redis.on("error", () => undefined);
  redis.once("ready", () => {
    connectedOnce.add(redis);
    // From the first connection on, a command issued on a fail-fast connection while Redis is away
    // fails at once instead of waiting in the offline queue (ioredis reads the option at every command).
    if (kind === "fail-fast") redis.options.enableOfflineQueue = false;
  });
  return redis;
}
