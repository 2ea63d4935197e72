import type { Server } from "node:http";
import { createApiServer } from "../../src/api/http/apiServer.ts";
import type { AddressInfo } from "node:net";
import { createApp, type RouteFactory } from "../../src/api/app.ts";
import type { AppDeps } from "../../src/api/appDeps.ts";
import { ApiKeyAuth, type ApiKeyAuthOptions } from "../../src/api/auth/apiKeyAuth.ts";
import type { Clock } from "../../src/runtime/clock.ts";
import { loadConfig, type Config } from "../../src/config/config.ts";
import { createPool, poolTimeouts } from "../../src/db/createPool.ts";
import { createRedis } from "../../src/redis/createRedis.ts";
import { type Logger, silentLogger } from "../../src/observability/logger.ts";
import { createMetrics } from "../../src/observability/metrics.ts";
import { routeFactories } from "../../src/api/routes.ts";
import { SignIn } from "../../src/api/accounts/signIn.ts";
import { createTestDatabase, TEST_POOL_TIMEOUTS, type TestDatabase } from "./testDatabase.ts";
import { createTestRedis, redisTargetEnv, TEST_REDIS_URL, type TestRedis } from "./testRedis.ts";
import type { RedisTarget } from "../../src/redis/redisTarget.ts";
import { PostgresFileStore } from "../../src/api/files/postgresFileStore.ts";
import { ApiShutdown } from "../../src/api/apiShutdown.ts";

export const TEST_ADMIN_TOKEN = "test-admin-token-0123456789abcdef";

/**
 * Every test client comes from 127.0.0.1: the per-address limits are raised far above what one test file
 * does, so only the tests about the limits (which set their own, lower ones) meet them.
 */
const TEST_RATE_LIMITS = {
  LOGIN_ATTEMPTS_PER_ACCOUNT_ADDRESS: "1000",
  LOGIN_ATTEMPTS_PER_ACCOUNT: "1000",
  LOGIN_ATTEMPTS_PER_ADDRESS: "100000",
  REGISTRATIONS_PER_ADDRESS: "100000",
  API_KEY_FAILURES_PER_ADDRESS: "100000",
};

export type TestApp = {
  baseUrl: string;
  deps: AppDeps;
  db: TestDatabase;
  testRedis: TestRedis;
  /** fetch against the app with JSON in and out. */
  request(method: string, path: string, options?: { body?: unknown; token?: string; headers?: Record<string, string> }): Promise<TestResponse>;
  close(): Promise<void>;
};

export type TestResponse = { status: number; headers: Headers; body: any; text: string };

/** The real Koa app on an ephemeral port, with a fresh database and a unique Redis prefix. */
export async function startTestApp(
  options: {
    routes?: RouteFactory[];
    clock?: Clock;
    env?: Record<string, string>;
    configure?: (config: Config) => Config;
    /** Cache TTL / last-used flush interval of this app's ApiKeyAuth. */
    keyAuth?: Pick<ApiKeyAuthOptions, "cacheTtlMs" | "lastUsedFlushIntervalMs">;
    /** A second API instance on the same database and Redis prefix as `shareWith` (own pool, Redis, cache). */
    shareWith?: TestApp;
    /**
     * The app reaches its (fresh) database at this rewrite of its URL (e.g. through a fault-injecting
     * proxy), with a pool of its own that has the API's timeouts (PG_* from `env`), as in production.
     */
    databaseUrl?: (url: string) => string;
    /** The Redis of the app (and of a platform's worker): a server's URL or a cluster; default TEST_REDIS_URL. */
    redisUrl?: string | RedisTarget;
    /** The app's logger (its access log among others); default silent. */
    logger?: Logger;
  } = {},
): Promise<TestApp> {
  const db = options.shareWith ? sharedDatabase(options.shareWith.db) : await createTestDatabase();
  const redisUrl = options.redisUrl ?? TEST_REDIS_URL;
  const testRedis = options.shareWith ? sharedRedis(options.shareWith.testRedis) : await createTestRedis(redisUrl);
  let config = loadConfig({
    DATABASE_URL: options.databaseUrl ? options.databaseUrl(db.url) : db.url,
    ...redisTargetEnv(testRedis.target),
    REDIS_PREFIX: testRedis.prefix,
    ADMIN_TOKEN: TEST_ADMIN_TOKEN,
    PORT: "1",
    ...TEST_RATE_LIMITS,
    ...options.env,
  });
  if (options.configure) config = options.configure(config);
  const pool = options.databaseUrl ? createPool(config.databaseUrl, 20, { timeouts: poolTimeouts(config, "api") }) : db.pool;
  const keyAuth = new ApiKeyAuth({ pool, redis: testRedis.redis, redisPrefix: config.redisPrefix, logger: silentLogger, ...options.keyAuth });
  await keyAuth.start();
  const clock = options.clock ?? { now: () => new Date() };
  const deps: AppDeps = {
    config,
    pool,
    redis: testRedis.redis,
    clock,
    logger: options.logger ?? silentLogger,
    metrics: createMetrics({ defaultMetrics: false }),
    accounts: { pool, changes: keyAuth.accountChanges() },
    keyAuth,
    signIn: new SignIn(config, testRedis.redis),
    files: new PostgresFileStore({ pool, clock, retentionDays: config.files.retentionDays }),
    shutdown: new ApiShutdown(),
  };
  const app = createApp(deps, options.routes ?? routeFactories);
  const handle = app.callback();
  const server: Server = createApiServer(handle, {
    headersTimeoutMs: config.headersTimeoutMs,
    requestTimeoutMs: config.requestTimeoutMs,
    onRefusal: (code) => deps.metrics.http.refusals.inc({ code }),
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    baseUrl,
    deps,
    db,
    testRedis,
    async request(method, path, { body, token, headers } = {}) {
      const response = await fetch(baseUrl + path, {
        method,
        headers: {
          ...(body !== undefined ? { "content-type": "application/json" } : {}),
          ...(token ? { authorization: `Bearer ${token}` } : {}),
          ...headers,
        },
        body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
      });
      const text = await response.text();
      let parsed: unknown;
      try {
        parsed = text ? JSON.parse(text) : undefined;
      } catch {
        parsed = undefined;
      }
      return { status: response.status, headers: response.headers, body: parsed, text };
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await keyAuth.stop();
      await testRedis.close().catch(() => undefined);
      if (pool !== db.pool) await pool.end();
      await db.drop();
    },
  };
}

function sharedDatabase(db: TestDatabase): TestDatabase {
  const pool = createPool(db.url, 20, { timeouts: TEST_POOL_TIMEOUTS });
  return { name: db.name, url: db.url, pool, drop: () => pool.end() };
}

function sharedRedis(other: TestRedis): TestRedis {
  const redis = createRedis(other.target, { kind: "fail-fast" });
  return { redis, prefix: other.prefix, target: other.target, close: async () => redis.disconnect() };
}
