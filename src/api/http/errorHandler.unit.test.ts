import pg from "pg";
import { describe, expect, it } from "vitest";
import { toApiError } from "./errorHandler.ts";
import { errorBody } from "./errors.ts";

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
