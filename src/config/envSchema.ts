import { z } from "zod";
import { parseRedisNodes } from "../redis/redisTarget.ts";

/**
 * The environment's variables, their defaults and checks (zod). Only `loadConfig` (config.ts) applies
 * it to the environment; everything else receives a Config.
 */

/** The longest delay a Node timer takes (2^31 - 1 ms): a longer one fires at once, with only a warning. */
export const MAX_TIMER_MS = 2_147_483_647;

/**
 * A whole number in decimal digits (`0x10`, `1e3` or `1.0` are refused); unset, empty or only spaces: the
 * default (` ` had become 0, turning features off). `max`: the largest taken.
 */
const intFromEnv = (fallback: number, max = Number.MAX_SAFE_INTEGER) =>
  z
    .string()
    .optional()
    .transform((raw, ctx) => {
      const v = raw?.trim();
      if (v === undefined || v === "") return fallback;
      const n = /^\d+$/.test(v) ? Number(v) : Number.NaN;
      if (!Number.isSafeInteger(n)) {
        ctx.addIssue({ code: "custom", message: `expected a non-negative whole number in decimal digits, got "${raw}"` });
        return z.NEVER;
      }
      if (n > max) {
        ctx.addIssue({ code: "custom", message: `must be at most ${max}, got ${n}` });
        return z.NEVER;
      }
      return n;
    });

/** Milliseconds a timer waits: at most MAX_TIMER_MS (about 24.8 days). */
const msFromEnv = (fallback: number) => intFromEnv(fallback, MAX_TIMER_MS);
/**
 * Seconds a timer waits: at most MAX_TIMER_MS in all. Durations that are no timer (a session's lifetime in
 * PostgreSQL, a Redis expiry, an age compared in SQL) take any whole number.
 */
const secondsFromEnv = (fallback: number) => intFromEnv(fallback, Math.floor(MAX_TIMER_MS / 1000));

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
        // Never the password it may hold (`postgres://user:secret@host:notaport/db`).
        ctx.addIssue({ code: "custom", message: `not a URL: "${value.replace(/(\/\/[^:/@]*:)[^@/]*@/, "$1***@")}"` });
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
      const items = (v === undefined || v.trim() === "" ? fallback : v)
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

export const EnvSchema = z.object({
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
  SESSION_IDLE_HOURS: intFromEnv(24).refine((n) => n >= 0, "must be 0 (off) or positive"),
  LOG_LEVEL: z.enum(["debug", "info", "warn", "error"]).optional().default("info"),
  OTEL_EXPORTER_OTLP_ENDPOINT: z
    .string()
    .optional()
    .refine((v) => v === undefined || URL.canParse(v), "must be a URL, e.g. http://127.0.0.1:4318"),
  OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: z.enum(["true", "false", ""]).optional(),
  PROJECTOR_POLL_MS: msFromEnv(100).refine((n) => n >= 10, "must be at least 10"),
  PROJECTOR_BATCH_SIZE: intFromEnv(200).refine((n) => n > 0, "must be positive"),
  BUDGET_HOLD_MAX_AGE_S: intFromEnv(1800).refine((n) => n > 0, "must be positive"),
  BUDGET_SWEEP_INTERVAL_S: secondsFromEnv(60),
  AUDIT_CHECKPOINT_INTERVAL_S: secondsFromEnv(60),
  AUDIT_CHECKPOINT_EVENTS: intFromEnv(0).refine((n) => n >= 0, "must not be negative"),
  AUDIT_SIGNING_KEY_PATH: z.string().optional(),
  AUDIT_PUBLIC_KEY_PATH: z.string().optional(),
  JOB_START_TIMEOUT_MS: msFromEnv(10_000).refine((n) => n > 0, "must be positive"),
  JOB_IDLE_TIMEOUT_MS: msFromEnv(300_000).refine((n) => n > 0, "must be positive"),
  CLIENT_FOLLOWS_PER_ACCOUNT: intFromEnv(64).refine((n) => n > 0, "must be positive"),
  JOB_START_TIMEOUT_STREAM_MS: msFromEnv(600_000).refine((n) => n > 0, "must be positive"),
  QUEUE_MAX_WAITING: intFromEnv(1000).refine((n) => n > 0, "must be positive"),
  COMPLETION_ABANDON_GRACE_MS: msFromEnv(60_000).refine((n) => n >= 0, "must not be negative"),
  BATCH_COMPLETION_WINDOW_MS: msFromEnv(86_400_000).refine((n) => n > 0, "must be positive"),
  BATCH_MAX_IN_FLIGHT: intFromEnv(16).refine((n) => n > 0, "must be positive"),
  BATCH_POLL_MS: msFromEnv(1_000).refine((n) => n >= 10, "must be at least 10"),
  BATCH_LINE_LEASE_MS: msFromEnv(60_000).refine((n) => n >= 1_000, "must be at least 1000"),
  SSE_KEEPALIVE_MS: msFromEnv(15_000).refine((n) => n >= 100, "must be at least 100"),
  STREAM_HEADERS_HOLD_MS: msFromEnv(500).refine((n) => n >= 0 && n <= 10_000, "must be 0 to 10000"),
  IDEMPOTENCY_TTL_S: intFromEnv(86_400).refine((n) => n > 0, "must be positive"),
  WORKER_MODELS: z.string().optional(),
  WORKER_HEARTBEAT_MS: msFromEnv(2_000).refine((n) => n >= 50, "must be at least 50"),
  WORKER_LOCK_MS: msFromEnv(5_000).refine((n) => n >= 200, "must be at least 200"),
  WORKER_STALLED_CHECK_MS: msFromEnv(2_000).refine((n) => n >= 50, "must be at least 50"),
  USAGE_WAIT_MS: msFromEnv(10_000).refine((n) => n >= 0, "must be at least 0"),
  DELTA_COALESCE_MS: msFromEnv(4),
  COMPLETION_RETENTION_S: intFromEnv(86_400).refine((n) => n > 0, "must be positive"),
  RESPONSES_RETENTION_DAYS: intFromEnv(30).refine((n) => n > 0, "must be positive"),
  DELTA_REPLAY_MAXLEN: intFromEnv(20_000).refine((n) => n > 0, "must be positive"),
  PG_CONNECT_TIMEOUT_MS: msFromEnv(1500).refine((n) => n > 0, "must be positive"),
  PG_API_STATEMENT_TIMEOUT_MS: msFromEnv(1000).refine((n) => n > 0, "must be positive"),
  PG_STATEMENT_TIMEOUT_MS: msFromEnv(30_000),
  PG_IDLE_IN_TRANSACTION_TIMEOUT_MS: msFromEnv(10_000),
  REDIS_CONNECT_TIMEOUT_MS: msFromEnv(1000).refine((n) => n > 0, "must be positive"),
  REDIS_COMMAND_TIMEOUT_MS: msFromEnv(1000).refine((n) => n > 0, "must be positive"),
  SHUTDOWN_GRACE_MS: msFromEnv(30_000).refine((n) => n > 0, "must be positive"),
  METRICS_PORT: intFromEnv(0).refine((n) => n < 65536, "must be a TCP port (1-65535), or 0 for none"),
  METRICS_ON_API_PORT: z.enum(["true", "false"], { message: 'expected "true" or "false"' }).optional().default("false"),
  TRUST_PROXY_HOPS: intFromEnv(0),
  MAX_REQUEST_BODY_BYTES: intFromEnv(4 * 1024 * 1024).refine((n) => n >= 1024, "must be at least 1024"),
  BODY_IDLE_TIMEOUT_MS: msFromEnv(30_000).refine((n) => n >= 100 && n <= 600_000, "must be 100 to 600000"),
  PUBLIC_BODY_TIMEOUT_MS: msFromEnv(10_000).refine((n) => n >= 100 && n <= 600_000, "must be 100 to 600000"),
  HEADERS_TIMEOUT_MS: msFromEnv(10_000).refine((n) => n >= 100 && n <= 300_000, "must be 100 to 300000"),
  REQUEST_TIMEOUT_MS: msFromEnv(300_000).refine((n) => n >= 1_000 && n <= 86_400_000, "must be 1000 to 86400000"),
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
    .transform((v) => (v === undefined || v.trim() === "" ? 0.5 : /^\d*\.?\d+$/.test(v.trim()) ? Number(v) : Number.NaN))
    .refine((n) => Number.isFinite(n) && n > 0 && n <= 1, "must be a fraction > 0 and <= 1"),
  QUEUE_INFLIGHT_TTL_S: intFromEnv(1800).refine((n) => n > 0, "must be positive"),
  // Files API (docs/configuration.md, "Files").
  FILES_MAX_BYTES: intFromEnv(209_715_200).refine((n) => n > 0, "must be positive"),
  FILES_MAX_LINES: intFromEnv(50_000).refine((n) => n > 0, "must be positive"),
  FILES_RETENTION_DAYS: intFromEnv(30),
});

/** The environment once checked, before it becomes a Config. */
export type Env = z.infer<typeof EnvSchema>;
