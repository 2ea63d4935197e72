import pg from "pg";
import { describe, expect, it } from "vitest";
import type { Context } from "koa";
import type { Logger } from "../../observability/logger.ts";
import { errorHandler, toApiError } from "./errorHandler.ts";
import { errorBody, ServiceUnavailableError } from "./errors.ts";

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
      path: "/v1/chat/completions",
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
          path: "/v1/chat/completions",
          requestId: "req_1",
          traceId: "0af7651916cd43dd8448eb211c80319c",
          dependency: "redis",
          cause: "Connection is closed.",
        },
      },
    ]);
  });
});
