import pg from "pg";
import { describe, expect, it } from "vitest";
import { isDatabaseUnavailable } from "./databaseUnavailable.ts";

const serverError = (code: string) => Object.assign(new pg.DatabaseError("from the server", 0, "error"), { code });
const systemError = (code: string) => Object.assign(new Error(`connect ${code} 127.0.0.1:5432`), { code, syscall: "connect" });

describe("isDatabaseUnavailable", () => {
  it("recognises refused, reset and timed-out connections, and silent servers", () => {
    for (const error of [
      systemError("ECONNREFUSED"),
      systemError("ECONNRESET"),
      systemError("ETIMEDOUT"),
      new Error("timeout exceeded when trying to connect"),
      new Error("Connection terminated unexpectedly"),
      new Error("Query read timeout"),
      new Error("Connection terminated due to connection timeout", { cause: new Error("timeout expired") }),
    ]) {
      expect(isDatabaseUnavailable(error), error.message).toBe(true);
    }
  });

  it("recognises the server's connection, resource, shutdown and timeout errors by SQLSTATE", () => {
    for (const code of ["08006", "53300", "57014", "57P01", "57P03", "25P03"]) expect(isDatabaseUnavailable(serverError(code)), code).toBe(true);
  });

  it("leaves a statement's own failures and anything else alone", () => {
    for (const code of ["23505", "40001", "42P01", "22P02"]) expect(isDatabaseUnavailable(serverError(code)), code).toBe(false);
    expect(isDatabaseUnavailable(new Error("something timed out, somewhere"))).toBe(false);
    expect(isDatabaseUnavailable("Query read timeout")).toBe(false);
    expect(isDatabaseUnavailable(undefined)).toBe(false);
  });
});
