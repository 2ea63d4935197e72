import { z } from "zod";

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

const EnvSchema = z.object({
  PORT: intFromEnv(8080).refine((n) => n > 0 && n < 65536, "must be a TCP port (1-65535)"),
  HOST: z.string().optional().default("0.0.0.0"),
  DATABASE_URL: urlWithProtocol(["postgres:", "postgresql:"], "postgres://postgres@127.0.0.1:5432/inference"),
  REDIS_URL: urlWithProtocol(["redis:", "rediss:"], "redis://127.0.0.1:6379"),
  REDIS_PREFIX: z.string().optional().default("inference"),
  ADMIN_TOKEN: z
    .string()
    .optional()
    .refine((v) => v === undefined || v === "" || v.length >= 16, "must be at least 16 characters"),
  MODELS_CONFIG: z.string().optional(),
  SESSION_TTL_HOURS: intFromEnv(24 * 7).refine((n) => n > 0, "must be positive"),
  LOG_LEVEL: z.enum(["debug", "info", "warn", "error"]).optional().default("info"),
  OTEL_EXPORTER_OTLP_ENDPOINT: z.string().optional(),
});

export type Config = {
  port: number;
  host: string;
  databaseUrl: string;
  redisUrl: string;
  redisPrefix: string;
  /** Operator secret for the admin API. Undefined means the admin API refuses everyone. */
  adminToken: string | undefined;
  modelsConfigPath: string;
  sessionTtlMs: number;
  logLevel: "debug" | "info" | "warn" | "error";
  otlpEndpoint: string | undefined;
};

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ConfigError";
  }
}

export const DEFAULT_MODELS_CONFIG = new URL("../models/registry.json", import.meta.url).pathname;

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
    redisPrefix: e.REDIS_PREFIX,
    adminToken: e.ADMIN_TOKEN === "" ? undefined : e.ADMIN_TOKEN,
    modelsConfigPath: e.MODELS_CONFIG ?? DEFAULT_MODELS_CONFIG,
    sessionTtlMs: e.SESSION_TTL_HOURS * 3600_000,
    logLevel: e.LOG_LEVEL,
    otlpEndpoint: e.OTEL_EXPORTER_OTLP_ENDPOINT,
  };
}
