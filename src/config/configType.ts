import type { RedisTarget } from "../redis/redisTarget.ts";

/** The service's settings, built from the environment by `loadConfig` (config.ts). */
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
  /** A session unused this long ends (SESSION_IDLE_HOURS; 0: only its lifetime ends it). */
  sessionIdleMs: number;
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
  /**
   * How long a new chat or text completion stream keeps its headers back once admitted, unless its first
   * chunk or its refusal comes first: a refusal the worker finds at the start (a prompt over the context
   * in tokens, a logit_bias token outside the vocabulary) is then an HTTP 400, not an error event in a 200
   * stream (STREAM_HEADERS_HOLD_MS; 0: the headers go out at admission).
   */
  streamHeadersHoldMs: number;
  /** How long an Idempotency-Key is remembered (per API key). */
  idempotencyTtlSeconds: number;
  /** How long a started job may stay silent (no delta) before the API gives up on it with api_error. */
  jobIdleTimeoutMs: number;
  /** Reads of stored completions and responses (GETs of running ones, resumes, attaches) an account may hold open at once, per API process. */
  clientFollowsPerAccount: number;
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
  /** A request body (JSON or an upload) that stops arriving for this long: 408, the connection closed (BODY_IDLE_TIMEOUT_MS). */
  bodyIdleTimeoutMs: number;
  /**
   * The whole body of a request to a route anyone may call (registration, sign-in) within this (a few
   * short fields): 408, the connection closed; one dripped a byte at a time held its connection for
   * minutes (PUBLIC_BODY_TIMEOUT_MS).
   */
  publicBodyTimeoutMs: number;
  /** A request's headers complete within this from its connection's start (or its previous answer): else 408, closed (HEADERS_TIMEOUT_MS). */
  headersTimeoutMs: number;
  /** A whole request (an upload's body included) within this: 408, closed (REQUEST_TIMEOUT_MS; Node's own 5 minutes by default). */
  requestTimeoutMs: number;
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
