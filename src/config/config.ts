import type { RedisTarget } from "../redis/redisTarget.ts";
import type { Config } from "./configType.ts";
import { EnvSchema, type Env } from "./envSchema.ts";

export type { Config, RateLimitSetting } from "./configType.ts";

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ConfigError";
  }
}

export const DEFAULT_MODELS_CONFIG = new URL("../../models/registry.json", import.meta.url).pathname;

/**
 * The only module that reads the environment (its caller passes `process.env`): checks it against
 * EnvSchema (envSchema.ts) and builds the Config everything else receives.
 */
export function loadConfig(env: Record<string, string | undefined>): Config {
  // A blank value (spaces only) is unset: the default, as an empty one is (docs/configuration.md).
  const set = Object.fromEntries(Object.entries(env).map(([name, value]) => [name, value !== undefined && value.trim() === "" ? undefined : value]));
  const parsed = EnvSchema.safeParse(set);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((issue) => `  ${issue.path.join(".")}: ${issue.message}`);
    throw new ConfigError(`Invalid environment:\n${lines.join("\n")}`);
  }
  const e = parsed.data;
  const redis = redisTarget(e, set.REDIS_URL !== undefined);
  // A whole request's bound below its headers' would never apply as set (it was raised to them silently).
  if (e.REQUEST_TIMEOUT_MS < e.HEADERS_TIMEOUT_MS) {
    throw new ConfigError(
      `Invalid environment:\n  REQUEST_TIMEOUT_MS: must be at least HEADERS_TIMEOUT_MS (${e.HEADERS_TIMEOUT_MS}), got ${e.REQUEST_TIMEOUT_MS}`,
    );
  }
  return {
    port: e.PORT,
    host: e.HOST,
    databaseUrl: e.DATABASE_URL,
    redisUrl: e.REDIS_URL,
    redis,
    redisPrefix: e.REDIS_PREFIX,
    adminToken: e.ADMIN_TOKEN === "" ? undefined : e.ADMIN_TOKEN,
    modelsConfigPath: e.MODELS_CONFIG ?? DEFAULT_MODELS_CONFIG,
    sessionTtlMs: e.SESSION_TTL_HOURS * 3600_000,
    sessionIdleMs: e.SESSION_IDLE_HOURS * 3600_000,
    logLevel: e.LOG_LEVEL,
    otlpEndpoint: e.OTEL_EXPORTER_OTLP_ENDPOINT || undefined,
    traceMessageContent: e.OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT === "true",
    projectorPollMs: e.PROJECTOR_POLL_MS,
    projectorBatchSize: e.PROJECTOR_BATCH_SIZE,
    budgetHoldMaxAgeMs: e.BUDGET_HOLD_MAX_AGE_S * 1000,
    budgetSweepIntervalMs: e.BUDGET_SWEEP_INTERVAL_S * 1000,
    auditCheckpointIntervalMs: e.AUDIT_CHECKPOINT_INTERVAL_S * 1000,
    auditCheckpointEvents: e.AUDIT_CHECKPOINT_EVENTS,
    auditSigningKeyPath: e.AUDIT_SIGNING_KEY_PATH || undefined,
    auditPublicKeyPath: e.AUDIT_PUBLIC_KEY_PATH || undefined,
    jobStartTimeoutMs: e.JOB_START_TIMEOUT_MS,
    jobIdleTimeoutMs: e.JOB_IDLE_TIMEOUT_MS,
    clientFollowsPerAccount: e.CLIENT_FOLLOWS_PER_ACCOUNT,
    jobStartTimeoutStreamMs: e.JOB_START_TIMEOUT_STREAM_MS,
    queueMaxWaiting: e.QUEUE_MAX_WAITING,
    completionAbandonGraceMs: e.COMPLETION_ABANDON_GRACE_MS,
    sseKeepAliveMs: e.SSE_KEEPALIVE_MS,
    streamHeadersHoldMs: e.STREAM_HEADERS_HOLD_MS,
    idempotencyTtlSeconds: e.IDEMPOTENCY_TTL_S,
    workerModels: parseList(e.WORKER_MODELS),
    workerHeartbeatMs: e.WORKER_HEARTBEAT_MS,
    usageWaitMs: e.USAGE_WAIT_MS,
    workerLockMs: e.WORKER_LOCK_MS,
    workerStalledCheckMs: e.WORKER_STALLED_CHECK_MS,
    deltaCoalesceMs: e.DELTA_COALESCE_MS,
    completionRetentionSeconds: e.COMPLETION_RETENTION_S,
    responsesRetentionDays: e.RESPONSES_RETENTION_DAYS,
    deltaReplayMaxLen: e.DELTA_REPLAY_MAXLEN,
    postgres: {
      connectTimeoutMs: e.PG_CONNECT_TIMEOUT_MS,
      apiStatementTimeoutMs: e.PG_API_STATEMENT_TIMEOUT_MS,
      statementTimeoutMs: e.PG_STATEMENT_TIMEOUT_MS,
      idleInTransactionTimeoutMs: e.PG_IDLE_IN_TRANSACTION_TIMEOUT_MS,
    },
    redisTimeouts: { connectTimeoutMs: e.REDIS_CONNECT_TIMEOUT_MS, commandTimeoutMs: e.REDIS_COMMAND_TIMEOUT_MS },
    shutdownGraceMs: e.SHUTDOWN_GRACE_MS,
    metrics: { port: e.METRICS_PORT === 0 ? undefined : e.METRICS_PORT, onApiPort: e.METRICS_ON_API_PORT === "true" },
    trustProxyHops: e.TRUST_PROXY_HOPS,
    maxRequestBodyBytes: e.MAX_REQUEST_BODY_BYTES,
    bodyIdleTimeoutMs: e.BODY_IDLE_TIMEOUT_MS,
    publicBodyTimeoutMs: e.PUBLIC_BODY_TIMEOUT_MS,
    headersTimeoutMs: e.HEADERS_TIMEOUT_MS,
    requestTimeoutMs: e.REQUEST_TIMEOUT_MS,
    rateLimits: {
      loginPerAccountAddress: { points: e.LOGIN_ATTEMPTS_PER_ACCOUNT_ADDRESS, durationSeconds: 15 * 60 },
      loginPerAccount: { points: e.LOGIN_ATTEMPTS_PER_ACCOUNT, durationSeconds: 3600 },
      loginPerAddress: { points: e.LOGIN_ATTEMPTS_PER_ADDRESS, durationSeconds: 3600 },
      registrationsPerAddress: { points: e.REGISTRATIONS_PER_ADDRESS, durationSeconds: 3600 },
      apiKeyFailuresPerAddress: { points: e.API_KEY_FAILURES_PER_ADDRESS, durationSeconds: 60 },
    },
    passwordHashing: { concurrency: e.PASSWORD_HASH_CONCURRENCY, maxWaiting: e.PASSWORD_HASH_MAX_WAITING },
    cors: { v1: e.CORS_V1_ORIGINS, api: e.CORS_API_ORIGINS },
    secretFromEnv: (name) => (env[name] === "" ? undefined : env[name]),
    batches: {
      completionWindowMs: e.BATCH_COMPLETION_WINDOW_MS,
      maxInFlight: e.BATCH_MAX_IN_FLIGHT,
      pollMs: e.BATCH_POLL_MS,
      lineLeaseMs: e.BATCH_LINE_LEASE_MS,
    },
    tenants: {
      account: {
        requestsPerMinute: e.RATE_LIMIT_REQUESTS_PER_MINUTE,
        tokensPerMinute: e.RATE_LIMIT_TOKENS_PER_MINUTE,
        concurrentRequests: e.RATE_LIMIT_CONCURRENT_REQUESTS,
      },
      key: {
        requestsPerMinute: e.RATE_LIMIT_KEY_REQUESTS_PER_MINUTE,
        tokensPerMinute: e.RATE_LIMIT_KEY_TOKENS_PER_MINUTE,
        concurrentRequests: e.RATE_LIMIT_KEY_CONCURRENT_REQUESTS,
      },
      queueAccountShare: e.QUEUE_ACCOUNT_SHARE,
      inFlightTtlMs: e.QUEUE_INFLIGHT_TTL_S * 1000,
    },
    files: { maxBytes: e.FILES_MAX_BYTES, maxLines: e.FILES_MAX_LINES, retentionDays: e.FILES_RETENTION_DAYS },
  };
}

function redisTarget(e: Env, urlSet: boolean): RedisTarget {
  if (e.REDIS_CLUSTER_NODES && e.REDIS_SENTINELS)
    throw new ConfigError("Invalid environment:\n  REDIS_CLUSTER_NODES and REDIS_SENTINELS: set one of them, not both");
  // REDIS_URL beside them was ignored without a word: an operator who meant the one server got the others.
  if (urlSet && (e.REDIS_CLUSTER_NODES || e.REDIS_SENTINELS)) {
    const other = e.REDIS_CLUSTER_NODES ? "REDIS_CLUSTER_NODES" : "REDIS_SENTINELS";
    throw new ConfigError(`Invalid environment:\n  REDIS_URL and ${other}: set one of them, not both (${other} replaces REDIS_URL)`);
  }
  const auth = {
    ...(e.REDIS_USERNAME ? { username: e.REDIS_USERNAME } : {}),
    ...(e.REDIS_PASSWORD ? { password: e.REDIS_PASSWORD } : {}),
    tls: e.REDIS_TLS === "true" || e.REDIS_TLS === "1",
  };
  if (e.REDIS_SENTINEL_NAME && !e.REDIS_SENTINELS) {
    throw new ConfigError("Invalid environment:\n  REDIS_SENTINEL_NAME: only with REDIS_SENTINELS (the sentinels that know the master)");
  }
  if (e.REDIS_CLUSTER_NODES) return { mode: "cluster", nodes: e.REDIS_CLUSTER_NODES, ...auth };
  if (e.REDIS_SENTINELS) {
    if (!e.REDIS_SENTINEL_NAME) throw new ConfigError("Invalid environment:\n  REDIS_SENTINEL_NAME: required with REDIS_SENTINELS (the master's name)");
    return {
      mode: "sentinel",
      sentinels: e.REDIS_SENTINELS,
      name: e.REDIS_SENTINEL_NAME,
      ...(e.REDIS_SENTINEL_PASSWORD ? { sentinelPassword: e.REDIS_SENTINEL_PASSWORD } : {}),
      ...auth,
    };
  }
  return { mode: "single", url: e.REDIS_URL };
}

/** "a, b,c" -> ["a", "b", "c"]; empty or absent -> undefined. */
function parseList(value: string | undefined): string[] | undefined {
  const items = (value ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  return items.length ? items : undefined;
}
