import pg from "pg";
import { describe, expect, it } from "vitest";
import type { Context } from "koa";
import type { Logger } from "../../observability/logger.ts";
import { errorHandler, toApiError } from "./errorHandler.ts";
import { ApiError, errorBody, InternalApiError, ServiceUnavailableError } from "./errors.ts";

describe("toApiError: dependency outages", () => {
  it("maps an unreachable PostgreSQL to 503 database_unavailable with Retry-After", () => {
    const error = toApiError(Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED" }));
    expect(error.status).toBe(503);
    expect(errorBody(error)).toEqual({ error: { message: expect.any(String), type: "service_unavailable", param: null, code: "database_unavailable" } });
    expect(Number(error.headers["retry-after"])).toBeGreaterThan(0);
  });

  it("maps an unreachable Redis to 503 redis_unavailable with Retry-After", () => {
    const error = toApiError(new Error("Stream isn't writeable and enableOfflineQueue options is false"));
    expect(error.status).toBe(503);
    expect(error).toMatchObject({ type: "service_unavailable", code: "redis_unavailable" });
    expect(Number(error.headers["retry-after"])).toBeGreaterThan(0);
  });

  it("keeps other failures a 500", () => {
    expect(toApiError(Object.assign(new pg.DatabaseError("duplicate key", 0, "error"), { code: "23505" })).status).toBe(500);
    expect(toApiError(new Error("boom")).status).toBe(500);
  });
});

describe("errorHandler: the line an outage's 503 writes", () => {
  it("carries the request's and trace's ids and the failure underneath, not the client's message", async () => {
    const lines: { message: string; fields: unknown }[] = [];
    const record = (message: string, fields?: unknown) => lines.push({ message, fields });
    const logger: Logger = { debug: record, info: record, warn: record, error: record, child: () => logger };
    const headers: Record<string, unknown> = {};
    const ctx = {
      method: "POST",
      // A credential a client put in the path never reaches the line.
      path: "/v1/chat/completions/sk-proj-SECRETSEGMENT1234567890abcdef",
      state: { requestId: "req_1", traceId: "0af7651916cd43dd8448eb211c80319c" },
      headerSent: false,
      writable: true,
      set: (values: Record<string, unknown>) => Object.assign(headers, values),
    } as unknown as Context & { status: number; body: unknown };
    await errorHandler(logger)(ctx, () => Promise.reject(new ServiceUnavailableError("redis", new Error("Connection is closed."))));
    expect(ctx.status).toBe(503);
    expect(lines).toEqual([
      {
        message: "request failed: dependency unavailable",
        fields: {
          method: "POST",
          path: "/v1/chat/completions/REDACTED",
          requestId: "req_1",
          traceId: "0af7651916cd43dd8448eb211c80319c",
          dependency: "redis",
          cause: "Connection is closed.",
        },
      },
    ]);
  });
});

describe("errorHandler: the line of a 5xx the platform chose, and of a failure", () => {
  const run = async (error: unknown) => {
    const lines: { level: string; message: string; fields: Record<string, unknown> }[] = [];
    const at =
      (level: string) =>
      (message: string, fields?: unknown): void => {
        lines.push({ level, message, fields: fields as Record<string, unknown> });
      };
    const logger: Logger = { debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error"), child: () => logger };
    const ctx = {
      method: "POST",
      path: "/api/v1/accounts/login",
      state: { requestId: "req_2" },
      headerSent: false,
      writable: true,
      set: () => undefined,
    } as unknown as Context & { status: number; body: unknown };
    await errorHandler(logger)(ctx, () => Promise.reject(error));
    return { status: ctx.status, lines };
  };

  it("writes a load shed (503 too_many_password_checks) as one warn line with its code, no stack", async () => {
    // As the sign-in's hashing gate answers it.
    const { status, lines } = await run(new ApiError(503, "service_unavailable", "Too many sign-in attempts.", { code: "too_many_password_checks" }));
    expect(status).toBe(503);
    expect(lines).toEqual([
      {
        level: "warn",
        message: "request refused",
        fields: { method: "POST", path: "/api/v1/accounts/login", requestId: "req_2", status: 503, code: "too_many_password_checks" },
      },
    ]);
  });

  it("writes an unexpected failure as an error with the error", async () => {
    for (const error of [new Error("boom"), new InternalApiError()]) {
      const { status, lines } = await run(error);
      expect(status).toBe(500);
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatchObject({ level: "error", message: "request failed", fields: { error } });
    }
  });
});
