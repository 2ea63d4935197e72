import { z } from "zod";
import { parseRedisNodes, type RedisTarget } from "../redis/redisTarget.ts";

/**
 * The only module that reads the environment. Everything else receives a Config.
 */
const intFromEnv = (fallback: number) =>
  z
    .string()
    .optional()
    .transform((v, ctx) => {
      if (v === undefined || v === "") return fallback;
      const n = Number(v);
      if (!Number.isInteger(n) || n < 0) {
        ctx.addIssue({ code: "custom", message: `expected a non-negative integer, got "${v}"` });
        return z.NEVER;
      }
      return n;
    });

const urlWithProtocol = (protocols: string[], fallback: string) =>
  z
    .string()
    .optional()
    .transform((v, ctx) => {
      const value = v === undefined || v === "" ? fallback : v;
      let parsed: URL;
      try {
        parsed = new URL(value);
      } catch {
        ctx.addIssue({ code: "custom", message: `not a URL: "${value}"` });
        return z.NEVER;
      }
      if (!protocols.includes(parsed.protocol)) {
        ctx.addIssue({ code: "custom", message: `expected ${protocols.join(" or ")} URL, got "${parsed.protocol}"` });
        return z.NEVER;
      }
      return value;
    });

/** "*", "none", or comma-separated origins (`https://app.example.com`, scheme + host [+ port], no path). */
const corsOrigins = (fallback: string) =>
  z
    .string()
    .optional()
    .transform((v, ctx) => {
      const items = (v === undefined ? fallback : v)
        .split(",")
        .map((s) => s.trim())
        .filter(Boolean);
      if (items.includes("*")) return "*" as const;
      const origins = items.filter((item) => item !== "none");
      for (const origin of origins) {
        let parsed: URL | null = null;
        try {
          parsed = new URL(origin);
        } catch {}
        if (!parsed || parsed.origin !== origin) {
          ctx.addIssue({ code: "custom", message: `"${origin}" is not an origin (scheme://host[:port], no path or trailing slash)` });
          return z.NEVER;
        }
      }
      return origins;
    });
const optionalNodes = z
  .string()
  .optional()
  .transform((v, ctx) => {
    if (v === undefined || v.trim() === "") return undefined;
    try {
      return parseRedisNodes(v);
    } catch (error) {
      ctx.addIssue({ code: "custom", message: (error as Error).message });
      return z.NEVER;
    }
  });

const EnvSchema = z.object({
  PORT: intFromEnv(8080).refine((n) => n > 0 && n < 65536, "must be a TCP port (1-65535)"),
  HOST: z.string().optional().default("0.0.0.0"),
  DATABASE_URL: urlWithProtocol(["postgres:", "postgresql:"], "postgres://postgres@127.0.0.1:5432/inference"),
  REDIS_URL: urlWithProtocol(["redis:", "rediss:"], "redis://127.0.0.1:6379"),
  REDIS_PREFIX: z
    .string()
    .optional()
    .transform((v) => (v === undefined || v === "" ? "inference" : v))
    .refine((v) => !/[{}]/.test(v), "must contain neither { nor } (the service adds the keys' Redis Cluster hash tags itself)"),
  REDIS_CLUSTER_NODES: optionalNodes,
  REDIS_SENTINELS: optionalNodes,
  REDIS_SENTINEL_NAME: z.string().optional(),
  REDIS_SENTINEL_PASSWORD: z.string().optional(),
  REDIS_USERNAME: z.string().optional(),
  REDIS_PASSWORD: z.string().optional(),
  REDIS_TLS: z.enum(["", "true", "false", "1", "0"]).optional(),
  ADMIN_TOKEN: z
    .string()
    .optional()
    .refine((v) => v === undefined || v === "" || v.length >= 16, "must be at least 16 characters"),
  MODELS_CONFIG: z.string().optional(),
  SESSION_TTL_HOURS: intFromEnv(24 * 7).refine((n) => n > 0, "must be positive"),
  LOG_LEVEL: z.enum(["debug", "info", "warn", "error"]).optional().default("info"),
  OTEL_EXPORTER_OTLP_ENDPOINT: z.string().optional(),
  OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: z.enum(["true", "false", ""]).optional(),
  PROJECTOR_POLL_MS: intFromEnv(100).refine((n) => n >= 10, "must be at least 10"),
  PROJECTOR_BATCH_SIZE: intFromEnv(200).refine((n) => n > 0, "must be positive"),
  BUDGET_HOLD_MAX_AGE_S: intFromEnv(1800).refine((n) => n > 0, "must be positive"),
  BUDGET_SWEEP_INTERVAL_S: intFromEnv(60),
  AUDIT_CHECKPOINT_INTERVAL_S: intFromEnv(60),
  AUDIT_CHECKPOINT_EVENTS: intFromEnv(0).refine((n) => n >= 0, "must not be negative"),
  AUDIT_SIGNING_KEY_PATH: z.string().optional(),
  AUDIT_PUBLIC_KEY_PATH: z.string().optional(),
  JOB_START_TIMEOUT_MS: intFromEnv(10_000).refine((n) => n > 0, "must be positive"),
  JOB_IDLE_TIMEOUT_MS: intFromEnv(300_000).refine((n) => n > 0, "must be positive"),
  JOB_START_TIMEOUT_STREAM_MS: intFromEnv(600_000).refine((n) => n > 0, "must be positive"),
  QUEUE_MAX_WAITING: intFromEnv(1000).refine((n) => n > 0, "must be positive"),
  COMPLETION_ABANDON_GRACE_MS: intFromEnv(60_000).refine((n) => n >= 0, "must not be negative"),
  BATCH_COMPLETION_WINDOW_MS: intFromEnv(86_400_000).refine((n) => n > 0, "must be positive"),
  BATCH_MAX_IN_FLIGHT: intFromEnv(16).refine((n) => n > 0, "must be positive"),
  BATCH_POLL_MS: intFromEnv(1_000).refine((n) => n >= 10, "must be at least 10"),
  BATCH_LINE_LEASE_MS: intFromEnv(60_000).refine((n) => n >= 1_000, "must be at least 1000"),
  SSE_KEEPALIVE_MS: intFromEnv(15_000).refine((n) => n >= 100, "must be at least 100"),
  IDEMPOTENCY_TTL_S: intFromEnv(86_400).refine((n) => n > 0, "must be positive"),
  WORKER_MODELS: z.string().optional(),
  WORKER_HEARTBEAT_MS: intFromEnv(2_000).refine((n) => n >= 50, "must be at least 50"),
  WORKER_LOCK_MS: intFromEnv(5_000).refine((n) => n >= 200, "must be at least 200"),
  WORKER_STALLED_CHECK_MS: intFromEnv(2_000).refine((n) => n >= 50, "must be at least 50"),
  USAGE_WAIT_MS: intFromEnv(10_000).refine((n) => n >= 0, "must be at least 0"),
  DELTA_COALESCE_MS: intFromEnv(4),
  COMPLETION_RETENTION_S: intFromEnv(86_400).refine((n) => n > 0, "must be positive"),
  RESPONSES_RETENTION_DAYS: intFromEnv(30).refine((n) => n > 0, "must be positive"),
  DELTA_REPLAY_MAXLEN: intFromEnv(20_000).refine((n) => n > 0, "must be positive"),
  PG_CONNECT_TIMEOUT_MS: intFromEnv(1500).refine((n) => n > 0, "must be positive"),
  PG_API_STATEMENT_TIMEOUT_MS: intFromEnv(1000).refine((n) => n > 0, "must be positive"),
  PG_STATEMENT_TIMEOUT_MS: intFromEnv(30_000),
  PG_IDLE_IN_TRANSACTION_TIMEOUT_MS: intFromEnv(10_000),
  REDIS_CONNECT_TIMEOUT_MS: intFromEnv(1000).refine((n) => n > 0, "must be positive"),
  REDIS_COMMAND_TIMEOUT_MS: intFromEnv(1000).refine((n) => n > 0, "must be positive"),
  SHUTDOWN_GRACE_MS: intFromEnv(30_000).refine((n) => n > 0, "must be positive"),
  METRICS_PORT: intFromEnv(0).refine((n) => n < 65536, "must be a TCP port (1-65535), or 0 for none"),
  METRICS_ON_API_PORT: z.enum(["true", "false"], { message: 'expected "true" or "false"' }).optional().default("false"),
  TRUST_PROXY_HOPS: intFromEnv(0),
  MAX_REQUEST_BODY_BYTES: intFromEnv(4 * 1024 * 1024).refine((n) => n >= 1024, "must be at least 1024"),
  LOGIN_ATTEMPTS_PER_ACCOUNT_ADDRESS: intFromEnv(10).refine((n) => n > 0, "must be positive"),
  LOGIN_ATTEMPTS_PER_ACCOUNT: intFromEnv(50).refine((n) => n > 0, "must be positive"),
  LOGIN_ATTEMPTS_PER_ADDRESS: intFromEnv(100).refine((n) => n > 0, "must be positive"),
  REGISTRATIONS_PER_ADDRESS: intFromEnv(10).refine((n) => n > 0, "must be positive"),
  API_KEY_FAILURES_PER_ADDRESS: intFromEnv(30).refine((n) => n > 0, "must be positive"),
  PASSWORD_HASH_CONCURRENCY: intFromEnv(1).refine((n) => n > 0, "must be positive"),
  PASSWORD_HASH_MAX_WAITING: intFromEnv(8),
  CORS_V1_ORIGINS: corsOrigins("*"),
  CORS_API_ORIGINS: corsOrigins(""),
  // Scheduling and per-tenant limits (docs/configuration.md, "Scheduling and rate limits").
  RATE_LIMIT_REQUESTS_PER_MINUTE: intFromEnv(3000).refine((n) => n > 0, "must be positive"),
  RATE_LIMIT_TOKENS_PER_MINUTE: intFromEnv(10_000_000).refine((n) => n > 0, "must be positive"),
  RATE_LIMIT_CONCURRENT_REQUESTS: intFromEnv(256).refine((n) => n > 0, "must be positive"),
  RATE_LIMIT_KEY_REQUESTS_PER_MINUTE: intFromEnv(3000).refine((n) => n > 0, "must be positive"),
  RATE_LIMIT_KEY_TOKENS_PER_MINUTE: intFromEnv(10_000_000).refine((n) => n > 0, "must be positive"),
  RATE_LIMIT_KEY_CONCURRENT_REQUESTS: intFromEnv(256).refine((n) => n > 0, "must be positive"),
  QUEUE_ACCOUNT_SHARE: z
    .string()
    .optional()
    .transform((v) => (v === undefined || v === "" ? 0.5 : Number(v)))
    .refine((n) => Number.isFinite(n) && n > 0 && n <= 1, "must be a fraction > 0 and <= 1"),
  QUEUE_INFLIGHT_TTL_S: intFromEnv(1800).refine((n) => n > 0, "must be positive"),
  // Files API (docs/configuration.md, "Files").
  FILES_MAX_BYTES: intFromEnv(209_715_200).refine((n) => n > 0, "must be positive"),
  FILES_MAX_LINES: intFromEnv(50_000).refine((n) => n > 0, "must be positive"),
  FILES_RETENTION_DAYS: intFromEnv(30),
});

export type RateLimitSetting = { points: number; durationSeconds: number };

export type Config = {
  port: number;
  host: string;
  databaseUrl: string;
  /** REDIS_URL: the single Redis server (the default target; unused with a cluster or Sentinel). */
  redisUrl: string;
  /** Where Redis is: REDIS_URL, or REDIS_CLUSTER_NODES, or REDIS_SENTINELS + REDIS_SENTINEL_NAME. */
  redis: RedisTarget;
  redisPrefix: string;
  /** Operator secret for the admin API. Undefined means the admin API refuses everyone. */
  adminToken: string | undefined;
  modelsConfigPath: string;
  sessionTtlMs: number;
  logLevel: "debug" | "info" | "warn" | "error";
  /** OTLP/HTTP endpoint of the trace exporter; undefined = tracing off. */
  otlpEndpoint: string | undefined;
  /** Spans may carry prompt and completion text (an operator's opt-in; off by default). */
  traceMessageContent: boolean;
  /** Projector: wait between polls of the event log when it has nothing new. */
  projectorPollMs: number;
  /** Projector: events applied per transaction. */
  projectorBatchSize: number;
  /** A budget hold older than this is released by the sweeper (its job is gone). Exceed the longest queue wait + run. */
  budgetHoldMaxAgeMs: number;
  /** How often the projector role sweeps orphaned holds; 0 disables the sweeper. */
  budgetSweepIntervalMs: number;
  /** How often the projector role writes an audit checkpoint (docs/audit.md); 0 disables it. */
  auditCheckpointIntervalMs: number;
  /** Also write a checkpoint as soon as this many events are uncovered; 0: by time only. */
  auditCheckpointEvents: number;
  /** PEM Ed25519 private key the projector signs checkpoints with; undefined: unsigned checkpoints. */
  auditSigningKeyPath: string | undefined;
  /** PEM public key `npm run audit -- verify` checks checkpoint signatures against. */
  auditPublicKeyPath: string | undefined;
  /** How long a non-streamed request waits for a worker to start its job before 503 model_unavailable (the job is removed). */
  jobStartTimeoutMs: number;
  /** The same for a streamed request (it has its headers, a queue position and keep-alive comments meanwhile). */
  jobStartTimeoutStreamMs: number;
  /** A new request finding more jobs than this waiting for its model answers 503 model_unavailable at once. */
  queueMaxWaiting: number;
  /** How long a completion whose last client went away keeps generating, waiting for a reconnect, before it is stopped. */
  completionAbandonGraceMs: number;
  /** An SSE stream with nothing to send writes a comment line this often, so proxies and clients do not time out. */
  sseKeepAliveMs: number;
  /** How long an Idempotency-Key is remembered (per API key). */
  idempotencyTtlSeconds: number;
  /** How long a started job may stay silent (no delta) before the API gives up on it with api_error. */
  jobIdleTimeoutMs: number;
  /** Model ids this worker serves; undefined = every model of the registry. */
  workerModels: string[] | undefined;
  /** Worker heartbeat period; a worker counts as live for three periods after its last beat. */
  workerHeartbeatMs: number;
  /** How long a finished job's client waits for its usage to be recorded (PostgreSQL away) before its stream ends anyway. */
  usageWaitMs: number;
  /**
   * How long a running job's lock lasts unless its worker renews it (BullMQ renews every half of it). A
   * worker that dies is noticed once its locks ran out (and the next stalled check ran): another worker
   * then continues its jobs. A worker whose event loop is blocked longer than this is taken for dead too.
   */
  workerLockMs: number;
  /** How often the workers of a queue look for jobs whose lock ran out (BullMQ's stalled-job check). */
  workerStalledCheckMs: number;
  /** Later deltas of a completion are batched for this long (the first one never waits). */
  deltaCoalesceMs: number;
  /** How long a completion's events and record are kept after its last message (resume, GET, idempotent retries). */
  completionRetentionSeconds: number;
  /** How long a stored response of the Responses API (its input and output) is kept before it is deleted. */
  responsesRetentionDays: number;
  /** Approximate cap on the entries of a completion's replay stream. */
  deltaReplayMaxLen: number;
  /** PostgreSQL timeouts of every pool (src/db/createPool.ts: poolTimeouts picks those of one use). */
  postgres: {
    /** Opening a connection, or waiting for a free one of a busy pool. */
    connectTimeoutMs: number;
    /** statement_timeout of the API's pools (the HTTP request path). */
    apiStatementTimeoutMs: number;
    /** statement_timeout of the other pools (worker, projector, operator CLI); 0 = none. */
    statementTimeoutMs: number;
    /** idle_in_transaction_session_timeout of every pool; 0 = none. */
    idleInTransactionTimeoutMs: number;
  };
  /** Redis timeouts (src/redis/createRedis.ts). */
  redisTimeouts: {
    /** Opening a connection (each reconnection attempt). */
    connectTimeoutMs: number;
    /** A command of a fail-fast (request path) connection that gets no answer within this fails. */
    commandTimeoutMs: number;
  };
  /** SIGTERM / SIGINT: how long the roles may take to drain before the process exits anyway. */
  shutdownGraceMs: number;
  /** Prometheus metrics (docs/observability.md). */
  metrics: {
    /** A listener serving only GET /metrics for every role of the process; undefined = none. */
    port: number | undefined;
    /** Whether the API also answers GET /metrics on its public port (default false: scrape METRICS_PORT). */
    onApiPort: boolean;
  };
  /**
   * Reverse proxies in front of the API whose X-Forwarded-For / -Proto are trusted: the client address is
   * the entry this many hops from the right. 0: the socket's address, forwarded headers ignored.
   */
  trustProxyHops: number;
  /** A JSON body larger than this is refused with 413 request_too_large before it is parsed. */
  maxRequestBodyBytes: number;
  /** Attempts per window (windows are fixed: see docs/configuration.md); over a limit: 429 with Retry-After. */
  rateLimits: {
    loginPerAccountAddress: RateLimitSetting;
    loginPerAccount: RateLimitSetting;
    loginPerAddress: RateLimitSetting;
    registrationsPerAddress: RateLimitSetting;
    /** Requests with an unknown or revoked API key from one client address. */
    apiKeyFailuresPerAddress: RateLimitSetting;
  };
  /** scrypt work of one API process: hashes at once, and hashes that may wait (more: 503 at once). */
  passwordHashing: { concurrency: number; maxWaiting: number };
  /** Browser origins allowed by CORS: on `/v1` (default any, without credentials) and on `/api` (default none). */
  cors: { v1: "*" | string[]; api: "*" | string[] };
  /** Reads an environment variable named by the model registry (an upstream engine's `apiKeyEnv`). */
  secretFromEnv: (name: string) => string | undefined;
  /**
   * Scheduling and per-tenant limits: the defaults of every subscription's rate limits (an operator may
   * set others per subscription), the part of a model's waiting jobs one account may hold, and how long
   * a job in flight counts for its account unless a worker reports it again (self-healing counters).
   */
  /**
   * The Batch API: a batch's completion window ("24h"; shorter for tests), the most lines of one batch
   * in flight at once, how often the dispatcher looks for work, and how long a line claimed by an API
   * process stays its own without a renewal (then another process runs it again, same completion id).
   */
  batches: { completionWindowMs: number; maxInFlight: number; pollMs: number; lineLeaseMs: number };
  tenants: {
    account: { requestsPerMinute: number; tokensPerMinute: number; concurrentRequests: number };
    key: { requestsPerMinute: number; tokensPerMinute: number; concurrentRequests: number };
    queueAccountShare: number;
    inFlightTtlMs: number;
  };
  /** Files API: an upload past maxBytes / maxLines is refused (400); a file is deleted retentionDays after its creation (0: kept until deleted). */
  files: { maxBytes: number; maxLines: number; retentionDays: number };
};

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ConfigError";
  }
}

export const DEFAULT_MODELS_CONFIG = new URL("../../models/registry.json", import.meta.url).pathname;

export function loadConfig(env: Record<string, string | undefined>): Config {
  const parsed = EnvSchema.safeParse(env);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((issue) => `  ${issue.path.join(".")}: ${issue.message}`);
    throw new ConfigError(`Invalid environment:\n${lines.join("\n")}`);
  }
  const e = parsed.data;
  return {
    port: e.PORT,
    host: e.HOST,
    databaseUrl: e.DATABASE_URL,
    redisUrl: e.REDIS_URL,
    redis: redisTarget(e),
    redisPrefix: e.REDIS_PREFIX,
    adminToken: e.ADMIN_TOKEN === "" ? undefined : e.ADMIN_TOKEN,
    modelsConfigPath: e.MODELS_CONFIG ?? DEFAULT_MODELS_CONFIG,
    sessionTtlMs: e.SESSION_TTL_HOURS * 3600_000,
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
    jobStartTimeoutStreamMs: e.JOB_START_TIMEOUT_STREAM_MS,
    queueMaxWaiting: e.QUEUE_MAX_WAITING,
    completionAbandonGraceMs: e.COMPLETION_ABANDON_GRACE_MS,
    sseKeepAliveMs: e.SSE_KEEPALIVE_MS,
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

function redisTarget(e: z.infer<typeof EnvSchema>): RedisTarget {
  if (e.REDIS_CLUSTER_NODES && e.REDIS_SENTINELS)
    throw new ConfigError("Invalid environment:\n  REDIS_CLUSTER_NODES and REDIS_SENTINELS: set one of them, not both");
  const auth = {
    ...(e.REDIS_USERNAME ? { username: e.REDIS_USERNAME } : {}),
    ...(e.REDIS_PASSWORD ? { password: e.REDIS_PASSWORD } : {}),
    tls: e.REDIS_TLS === "true" || e.REDIS_TLS === "1",
  };
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
