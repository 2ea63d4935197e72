import { pino, type Logger as PinoLogger } from "pino";

export type LogLevel = "debug" | "info" | "warn" | "error";
export type LogFields = Record<string, unknown>;

export type Logger = {
  debug(message: string, fields?: LogFields): void;
  info(message: string, fields?: LogFields): void;
  warn(message: string, fields?: LogFields): void;
  error(message: string, fields?: LogFields): void;
  child(fields: LogFields): Logger;
};

/**
 * Field names whose values are never written one level down (a `headers` object, a `request`):
 * pino's redaction replaces them by "[redacted]". Callers never pass secrets; this is the second line
 * of defence.
 */
const SECRET_NAMES = [
  "authorization",
  "Authorization",
  "cookie",
  "Cookie",
  "set-cookie",
  "x-api-key",
  "password",
  "passwordHash",
  "secret",
  "token",
  "sessionToken",
  "adminToken",
  "apiKey",
  "api_key",
  "key",
];
const REDACT_PATHS = SECRET_NAMES.map((name) => `*["${name}"]`);

/** Top-level fields with a secret-looking name (`upstreamApiKey`, `refresh_token`; not `outputTokens`) are redacted too. */
const SECRET_FIELD = /pass(word)?|secret|token$|authorization|cookie|api_?key|^key$/i;

/**
 * JSON lines (pino) on stderr, or through `write` (tests): `time` (ISO 8601), `level` (its name),
 * `message`, the base fields and the line's own. Errors become `{ name, message, stack }`.
 */
export function createLogger(level: LogLevel, base: LogFields = {}, write?: (line: string) => void): Logger {
  const destination = write ? { write: (line: string) => write(line.endsWith("\n") ? line.slice(0, -1) : line) } : pino.destination({ dest: 2, sync: true });
  const root = pino(
    {
      level,
      base: null,
      messageKey: "message",
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      redact: { paths: REDACT_PATHS, censor: "[redacted]" },
    },
    destination,
  );
  return wrap(Object.keys(base).length ? root.child(clean(base)) : root);
}

function wrap(logger: PinoLogger): Logger {
  return {
    debug: (message, fields) => logger.debug(clean(fields), message),
    info: (message, fields) => logger.info(clean(fields), message),
    warn: (message, fields) => logger.warn(clean(fields), message),
    error: (message, fields) => logger.error(clean(fields), message),
    child: (fields) => wrap(logger.child(clean(fields))),
  };
}

function clean(fields: LogFields = {}): LogFields {
  const out: LogFields = {};
  for (const [k, v] of Object.entries(fields)) {
    if (SECRET_FIELD.test(k)) out[k] = "[redacted]";
    else if (v instanceof Error) out[k] = { name: v.name, message: v.message, stack: v.stack };
    else out[k] = v;
  }
  return out;
}

export const silentLogger: Logger = createLogger("error", {}, () => undefined);
