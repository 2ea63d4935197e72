import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "./config.ts";

describe("loadConfig: limits, proxies and CORS", () => {
  it("defaults: CORS for any origin on /v1 and none on /api, no trusted proxy (the socket address), OWASP-sized sign-in limits", () => {
    const config = loadConfig({});
    expect(config.cors).toEqual({ v1: "*", api: [] });
    expect(config.trustProxyHops).toBe(0);
    expect(config.maxRequestBodyBytes).toBe(4 * 1024 * 1024);
    expect(config.rateLimits.loginPerAccountAddress).toEqual({ points: 10, durationSeconds: 900 });
    expect(config.rateLimits.registrationsPerAddress).toEqual({ points: 10, durationSeconds: 3600 });
    expect(config.passwordHashing).toEqual({ concurrency: 1, maxWaiting: 8 });
  });

  it("reads origin lists, 'none' and '*'", () => {
    const config = loadConfig({ CORS_V1_ORIGINS: "none", CORS_API_ORIGINS: " https://a.example.com, http://localhost:5173 " });
    expect(config.cors).toEqual({ v1: [], api: ["https://a.example.com", "http://localhost:5173"] });
    expect(loadConfig({ CORS_API_ORIGINS: "https://a.example.com,*" }).cors.api).toBe("*");
  });

  it.each([["https://a.example.com/"], ["a.example.com"], ["https://a.example.com/path"]])("refuses %s as an origin", (origin) => {
    expect(() => loadConfig({ CORS_API_ORIGINS: origin })).toThrow(ConfigError);
  });

  it("refuses a zero limit", () => {
    expect(() => loadConfig({ LOGIN_ATTEMPTS_PER_ADDRESS: "0" })).toThrow(/LOGIN_ATTEMPTS_PER_ADDRESS/);
  });

  it("refuses a timer past what Node's timers take (2^31 - 1 ms), by its name, in ms or s (it fired at once)", () => {
    for (const [name, value] of [
      ["JOB_IDLE_TIMEOUT_MS", "2147483648"],
      ["SHUTDOWN_GRACE_MS", "99999999999999999999999"],
      ["BUDGET_SWEEP_INTERVAL_S", "2147484"],
    ]) {
      expect(() => loadConfig({ [name!]: value }), name).toThrow(new RegExp(name!));
    }
    expect(loadConfig({ JOB_IDLE_TIMEOUT_MS: "2147483647" }).jobIdleTimeoutMs).toBe(2_147_483_647);
    // Durations that are no timer (a session in PostgreSQL, Redis expiries) take longer values, as before.
    const long = loadConfig({ SESSION_TTL_HOURS: "720", IDEMPOTENCY_TTL_S: "2592000", COMPLETION_RETENTION_S: "2592000", BUDGET_HOLD_MAX_AGE_S: "2592000" });
    expect(long.idempotencyTtlSeconds).toBe(2_592_000);
  });

  it("takes a blank value as unset (the default), and refuses numbers not in decimal digits", () => {
    const blank = loadConfig({ SESSION_IDLE_HOURS: " ", PG_STATEMENT_TIMEOUT_MS: " ", CORS_V1_ORIGINS: " ", LOG_LEVEL: "", METRICS_ON_API_PORT: " " });
    const defaults = loadConfig({});
    expect(blank.sessionIdleMs).toBe(defaults.sessionIdleMs);
    expect(blank.cors.v1).toBe("*");
    expect(blank.logLevel).toBe("info");
    for (const value of ["0x10", "1e3", "1.0", "-1", "12abc"]) expect(() => loadConfig({ PORT: value }), value).toThrow(/PORT/);
    for (const value of ["0x1", "1e-1"]) expect(() => loadConfig({ QUEUE_ACCOUNT_SHARE: value }), value).toThrow(/QUEUE_ACCOUNT_SHARE/);
    expect(() => loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "notaurl" })).toThrow(/OTEL_EXPORTER_OTLP_ENDPOINT/);
    const spaces = loadConfig({ DATABASE_URL: " ", REDIS_URL: "  ", REDIS_TLS: " ", MODELS_CONFIG: " ", HOST: " " });
    expect(spaces.databaseUrl).toBe(defaults.databaseUrl);
    expect(spaces.host).toBe(defaults.host);
  });

  it("never repeats a password of a URL it refuses", () => {
    for (const env of [{ DATABASE_URL: "postgres://postgres:S3cretPassw0rd@127.0.0.1:notaport/x" }, { REDIS_URL: "redis://:secretpw@127.0.0.1:notaport" }]) {
      let message = "";
      try {
        loadConfig(env);
      } catch (error) {
        message = (error as Error).message;
      }
      expect(message).toMatch(/not a URL/);
      expect(message).not.toMatch(/S3cretPassw0rd|secretpw/);
    }
  });

  it("refuses REDIS_SENTINEL_NAME without REDIS_SENTINELS (it was ignored)", () => {
    expect(() => loadConfig({ REDIS_SENTINEL_NAME: "mymaster" })).toThrow(/REDIS_SENTINEL_NAME/);
  });

  it("refuses REQUEST_TIMEOUT_MS below HEADERS_TIMEOUT_MS (it was raised to it without a word)", () => {
    expect(() => loadConfig({ REQUEST_TIMEOUT_MS: "5000" })).toThrow(/REQUEST_TIMEOUT_MS: must be at least HEADERS_TIMEOUT_MS \(10000\), got 5000/);
    expect(() => loadConfig({ REQUEST_TIMEOUT_MS: "5000", HEADERS_TIMEOUT_MS: "6000" })).toThrow(/HEADERS_TIMEOUT_MS \(6000\)/);
    expect(loadConfig({ REQUEST_TIMEOUT_MS: "5000", HEADERS_TIMEOUT_MS: "5000" }).requestTimeoutMs).toBe(5000);
  });
});
