import pg from "pg";
import { Redis } from "ioredis";
import { createRedis } from "../redis/createRedis.ts";
import { describeRedisTarget, type RedisTarget } from "../redis/redisTarget.ts";

export class DependencyUnavailableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "DependencyUnavailableError";
  }
}

function redactUrl(url: string): string {
  const u = new URL(url);
  if (u.password) u.password = "***";
  return u.toString();
}

/** Fails fast, saying which service does not answer and how to start it. */
export async function checkPostgres(databaseUrl: string): Promise<void> {
  const admin = new URL(databaseUrl);
  admin.pathname = "/postgres";
  const client = new pg.Client({ connectionString: admin.toString(), connectionTimeoutMillis: 3000 });
  // A lost connection fails the query (reported below); its 'error' event must not crash the process.
  client.on("error", () => undefined);
  try {
    await client.connect();
    await client.query("SELECT 1");
  } catch (error) {
    throw new DependencyUnavailableError(
      `PostgreSQL is not answering at ${redactUrl(databaseUrl)} (${(error as Error).message}).\n` +
        `Start it, e.g. \`pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start\` or ` +
        "`docker compose up -d postgres`, or set DATABASE_URL.",
    );
  } finally {
    await client.end().catch(() => undefined);
  }
}

export async function checkRedis(target: RedisTarget | string): Promise<void> {
  const where = typeof target === "string" ? redactUrl(target) : describeRedisTarget(target);
  try {
    if (typeof target === "string" || target.mode === "single") await pingServer(typeof target === "string" ? target : target.url);
    else await pingTarget(target);
  } catch (error) {
    throw new DependencyUnavailableError(
      `Redis is not answering at ${where} (${(error as Error).message}).\n` +
        "Start it, e.g. `redis-server --daemonize yes --bind 127.0.0.1 --port 6379` or `docker compose up -d redis`, or set REDIS_URL " +
        "(or REDIS_CLUSTER_NODES, or REDIS_SENTINELS and REDIS_SENTINEL_NAME).",
    );
  }
}

/** How long the start-up check waits for a dependency's answer (connection and first command together). */
const ANSWER_WITHIN_MS = 3000;

/** `work`, or a rejection once ANSWER_WITHIN_MS have passed without its answer (a server that accepts connections and says nothing). */
async function withinDeadline<T>(work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      work,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${ANSWER_WITHIN_MS / 1000} s`)), ANSWER_WITHIN_MS);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

async function pingServer(redisUrl: string): Promise<void> {
  const redis = new Redis(redisUrl, { lazyConnect: true, connectTimeout: ANSWER_WITHIN_MS, maxRetriesPerRequest: 0, retryStrategy: () => null });
  redis.on("error", () => undefined);
  try {
    // The ready check (INFO) and the PING wait for an answer past the TCP connection: bounded together.
    await withinDeadline(
      (async () => {
        await redis.connect();
        await redis.ping();
      })(),
    );
  } finally {
    redis.disconnect();
  }
}

/** A cluster or a Sentinel-managed master: PING through the service's own client, for at most 3 s. */
async function pingTarget(target: RedisTarget): Promise<void> {
  const redis = createRedis(target, { kind: "fail-fast", timeouts: { connectTimeoutMs: ANSWER_WITHIN_MS, commandTimeoutMs: ANSWER_WITHIN_MS } });
  try {
    await withinDeadline(redis.ping());
  } finally {
    redis.disconnect();
  }
}
