import pg from "pg";
import { Redis } from "ioredis";

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

export async function checkRedis(redisUrl: string): Promise<void> {
  const redis = new Redis(redisUrl, { lazyConnect: true, connectTimeout: 3000, maxRetriesPerRequest: 0, retryStrategy: () => null });
  redis.on("error", () => undefined);
  try {
    await redis.connect();
    await redis.ping();
  } catch (error) {
    throw new DependencyUnavailableError(
      `Redis is not answering at ${redactUrl(redisUrl)} (${(error as Error).message}).\n` +
        "Start it, e.g. `redis-server --daemonize yes --bind 127.0.0.1 --port 6379` or `docker compose up -d redis`, or set REDIS_URL.",
    );
  } finally {
    redis.disconnect();
  }
}
