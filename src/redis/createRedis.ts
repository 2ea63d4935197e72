import { Cluster, type ClusterOptions, Redis as RedisServer, type RedisOptions } from "ioredis";
import type { RedisTarget } from "./redisTarget.ts";

/**
 * A connection to Redis: a client of one server (also when found through Sentinel) or of a Redis Cluster.
 * Code using it issues commands whose keys hash to one slot (see InferenceKeys) and never relies on
 * which server answers.
 */
export type Redis = RedisServer | Cluster;

/** The configuration's `redisTimeouts` (REDIS_CONNECT_TIMEOUT_MS, REDIS_COMMAND_TIMEOUT_MS). */
export type RedisTimeouts = {
  /** Opening a connection (each reconnection attempt). */
  connectTimeoutMs: number;
  /** A command of a fail-fast (request path) connection that gets no answer within this fails. */
  commandTimeoutMs: number;
};

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
  // No CLIENT SETINFO on connect: Redis before 7.2 refuses it (an error span on every connection a
  // follower opens), and it is a round trip more before a connection is ready.
  const common: RedisOptions = {
    enableReadyCheck: true,
    connectTimeout: timeouts.connectTimeoutMs,
    retryStrategy: reconnectDelay,
    disableClientInfo: true,
  };
  if (kind === "fail-fast") {
    return { ...common, maxRetriesPerRequest: 0, enableOfflineQueue: true, commandTimeout: timeouts.commandTimeoutMs, autoResendUnfulfilledCommands: false };
  }
  return { ...common, maxRetriesPerRequest: null, enableOfflineQueue: true, commandTimeout: undefined, autoResendUnfulfilledCommands: true };
}

/**
 * The options of a Redis Cluster client of a kind: the kind's options for every node connection, and the
 * cluster's own reconnection (slot map refresh) at the same pace. Nodes come and go with the cluster's
 * slot map (ioredis connects to a node when a command is first routed to it).
 */
export function clusterOptions(kind: RedisKind, timeouts: RedisTimeouts = DEFAULT_REDIS_TIMEOUTS): ClusterOptions {
  return {
    redisOptions: redisOptions(kind, timeouts),
    enableReadyCheck: true,
    enableOfflineQueue: true,
    clusterRetryStrategy: reconnectDelay,
    slotsRefreshTimeout: timeouts.connectTimeoutMs,
    ...(kind === "fail-fast" ? {} : FAILOVER_WAIT),
  };
}

/**
 * A worker's or subscriber's command waits through a master's failover (its replica promoted after the
 * cluster's node timeout, then an election: seconds) as it waits for one server to come back: tried
 * again every 250 ms (its node's connection closed, the cluster down, TRYAGAIN; a MOVED 50 ms later, so
 * that two nodes' differing maps during the failover do not use the tries up at once) for up to about 5
 * minutes (the jobs' idle timeout). ioredis's defaults (16 tries, 100 ms apart) gave up within two
 * seconds: a worker's writes of a running reply failed, and the streams lost their middle.
 */
const FAILOVER_WAIT = {
  maxRedirections: 1_200,
  retryDelayOnFailover: 250,
  retryDelayOnClusterDown: 250,
  retryDelayOnTryAgain: 250,
  retryDelayOnMoved: 50,
} satisfies ClusterOptions;

/**
 * The one factory of Redis clients: `target` is where Redis is (a URL string means one server). A single
 * server is a plain ioredis client, as fast as before; a cluster an ioredis Cluster; Sentinel a plain
 * client that asks the sentinels for the master (and again after a failover).
 */
export function createRedis(target: RedisTarget | string, options: CreateRedisOptions): Redis {
  const lazyConnect = options.lazyConnect ?? false;
  if (typeof target === "string" || target.mode === "single") {
    const url = typeof target === "string" ? target : target.url;
    return prepared(new RedisServer(url, { ...redisOptions(options.kind, options.timeouts), lazyConnect }), options.kind);
  }
  const auth = {
    ...(target.username ? { username: target.username } : {}),
    ...(target.password ? { password: target.password } : {}),
    ...(target.tls ? { tls: {} } : {}),
  };
  if (target.mode === "cluster") {
    const cluster = clusterOptions(options.kind, options.timeouts);
    return prepared(new Cluster(target.nodes, { ...cluster, redisOptions: { ...cluster.redisOptions, ...auth }, lazyConnect }), options.kind);
  }
  return prepared(
    new RedisServer({
      ...redisOptions(options.kind, options.timeouts),
      ...auth,
      sentinels: target.sentinels,
      name: target.name,
      ...(target.sentinelPassword ? { sentinelPassword: target.sentinelPassword } : {}),
      ...(target.tls ? { enableTLSForSentinelMode: true } : {}),
      sentinelRetryStrategy: reconnectDelay,
      lazyConnect,
    }),
    options.kind,
  );
}

/**
 * A new connection to the same server or cluster as `redis`, of another kind, with the same timeouts (e.g. a
 * subscriber next to commands). `shardedSubscribers`: on a cluster, one subscriber connection per master
 * for SSUBSCRIBE (ioredis' option; nothing changes for a single server).
 */
export function duplicateAs(redis: Redis, kind: RedisKind, options: { shardedSubscribers?: boolean } = {}): Redis {
  if (redis instanceof Cluster) {
    const nodeOptions = redis.options.redisOptions ?? {};
    const timeouts = timeoutsOf(nodeOptions);
    const cluster = clusterOptions(kind, timeouts);
    const sharded = options.shardedSubscribers ? { shardedSubscribers: true } : {};
    // Keeps the cluster's credentials and TLS; replaces what differs between kinds.
    return prepared(redis.duplicate([], { ...cluster, ...sharded, redisOptions: { ...nodeOptions, ...cluster.redisOptions }, lazyConnect: false }), kind);
  }
  return prepared(redis.duplicate({ ...redisOptions(kind, timeoutsOf(redis.options)), lazyConnect: false }), kind);
}

/** Whether `redis` is a Redis Cluster client (commands are routed by slot; SCAN must visit every master). */
export function isCluster(redis: Redis): redis is Cluster {
  return redis instanceof Cluster;
}

function timeoutsOf(options: RedisOptions): RedisTimeouts {
  return {
    connectTimeoutMs: options.connectTimeout ?? DEFAULT_REDIS_TIMEOUTS.connectTimeoutMs,
    commandTimeoutMs: options.commandTimeout ?? DEFAULT_REDIS_TIMEOUTS.commandTimeoutMs,
  };
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
    if (kind === "fail-fast" && !(redis instanceof Cluster)) redis.options.enableOfflineQueue = false;
  });
  if (kind === "fail-fast" && redis instanceof Cluster) {
    // A cluster's node connections open lazily, and without the cluster's offline queue a command for a
    // node whose connection is still opening would be refused: the queue stays on while the cluster is
    // up (a command then fails after commandTimeoutMs, or at once when its node's connection drops), and
    // is off while the whole cluster is away, so commands fail at once as on one server.
    redis.on("ready", () => {
      redis.options.enableOfflineQueue = true;
    });
    redis.on("close", () => {
      if (connectedOnce.has(redis)) redis.options.enableOfflineQueue = false;
    });
  }
  return redis;
}
