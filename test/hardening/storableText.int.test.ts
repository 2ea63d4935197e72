import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/testApp.ts";
import { createTestAccount, type TestAccount } from "../support/testAccounts.ts";
import { expectApiError, newEmail, PASSWORD, register, totalEvents } from "../accounts/accountSteps.ts";

/** Strings PostgreSQL cannot store: a 400 naming the param before they reach it, never a 500. */
const UNSTORABLE = [
  ["a NUL byte", "a\u0000b"],
  ["a lone high surrogate", "a\ud800b"],
  ["a lone low surrogate", "\udc00"],
] as const;

let app: TestApp;
let account: TestAccount;
beforeAll(async () => {
  app = await startTestApp();
  account = await createTestAccount(app.deps.pool);
});
afterAll(async () => {
  await app.close();
});

describe("text PostgreSQL cannot store is a 400 naming the param", () => {
  it.each(UNSTORABLE)("key create and rename with %s in the name", async (_label, bad) => {
    const before = await totalEvents(app);
    const created = await app.request("POST", "/api/v1/accounts/user/api-keys/create", { token: account.sessionToken, body: { name: bad } });
    expectApiError(created, 400, "invalid_request_error", { param: "name", code: "invalid_value" });

    const ok = await app.request("POST", "/api/v1/accounts/user/api-keys/create", { token: account.sessionToken, body: { name: "fine" } });
    expect(ok.status, ok.text).toBe(201);
    const renamed = await app.request("PATCH", `/api/v1/accounts/user/api-keys/${ok.body.id}/update`, { token: account.sessionToken, body: { name: bad } });
    expectApiError(renamed, 400, "invalid_request_error", { param: "name", code: "invalid_value" });
    const revoked = await app.request("POST", `/api/v1/accounts/user/api-keys/${ok.body.id}/revoke`, { token: account.sessionToken });
    expect(revoked.status, revoked.text).toBe(200);
    expect(await totalEvents(app)).toBe(before + 2);
  });

  it.each(UNSTORABLE)("login and registration with %s in the email", async (_label, bad) => {
    const email = newEmail("text");
    await register(app, email);
    const before = await totalEvents(app);
    for (const candidate of [`${bad}${email}`, email.replace("@", `${bad}@`), `${email}${bad}`]) {
      const login = await app.request("POST", "/api/v1/accounts/login", { body: { email: candidate, password: PASSWORD } });
      expectApiError(login, 400, "invalid_request_error", { param: "email", code: "invalid_value" });
      const registration = await app.request("POST", "/api/v1/accounts/register", { body: { email: candidate, password: PASSWORD } });
      expectApiError(registration, 400, "invalid_request_error", { param: "email" });
    }
    expect(await totalEvents(app)).toBe(before);
  });

  it.each([
    ["start_date=0000-01-01&end_date=0000-01-31", "start_date"],
    ["start_date=0000-01-01", "start_date"],
    ["start_date=1999-12-31&end_date=2000-01-31", "start_date"],
    ["start_date=2025-01-01&end_date=0000-01-01", "end_date"],
    ["start_date=9999-12-31", null],
  ])("usage with out-of-range dates (%s)", async (query, param) => {
    const res = await app.request("GET", `/api/v1/accounts/user/usage?${query}`, { token: account.sessionToken });
    if (param === null) {
      // The far end of the range is a date PostgreSQL holds: an empty answer, not an error.
      expect(res.status, res.text).toBe(200);
      expect(res.body.data).toEqual([]);
    } else {
      expectApiError(res, 400, "invalid_request_error", { param });
    }
  });
});
