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

async function pingServer(redisUrl: string): Promise<void> {
  const redis = new Redis(redisUrl, { lazyConnect: true, connectTimeout: 3000, maxRetriesPerRequest: 0, retryStrategy: () => null });
  redis.on("error", () => undefined);
  try {
    await redis.connect();
    await redis.ping();
  } finally {
    redis.disconnect();
  }
}

/** A cluster or a Sentinel-managed master: PING through the service's own client, for at most 3 s. */
async function pingTarget(target: RedisTarget): Promise<void> {
  const redis = createRedis(target, { kind: "fail-fast", timeouts: { connectTimeoutMs: 3000, commandTimeoutMs: 3000 } });
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      redis.ping(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error("no answer within 3 s")), 3000);
      }),
    ]);
  } finally {
    clearTimeout(timer);
    redis.disconnect();
  }
}
