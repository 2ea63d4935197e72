import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { accountEvents, expectApiError, login, newEmail, register, totalEvents } from "../accounts/accountSteps.ts";
import { startTestApp, TEST_ADMIN_TOKEN, type TestApp } from "../support/testApp.ts";

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app.close();
});

const subscriptionPath = (accountId: string) => `/api/v1/admin/accounts/${accountId}/subscription`;
const asAdmin = { token: TEST_ADMIN_TOKEN };

describe("admin authentication", () => {
  it("answers 403 Forbidden without a token, with a wrong one, or with a session token", async () => {
    const email = newEmail("victim");
    const account = await register(app, email);
    const session = await login(app, email);
    const body = { status: "active", monthly_budget_chf: 100 };
    for (const token of [undefined, "wrong-admin-token-0123456789", TEST_ADMIN_TOKEN.slice(0, -1), `${TEST_ADMIN_TOKEN}x`, session]) {
      expectApiError(await app.request("PUT", subscriptionPath(account.id), { body, token }), 403, "Forbidden", { code: "invalid_admin_token" });
      expectApiError(await app.request("GET", `/api/v1/admin/accounts?email=${encodeURIComponent(email)}`, { token }), 403, "Forbidden");
    }
    expect(await accountEvents(app, account.id)).toHaveLength(1);
  });

  it("refuses everyone when no ADMIN_TOKEN is configured", async () => {
    const closed = await startTestApp({ configure: (config) => ({ ...config, adminToken: undefined }) });
    try {
      for (const token of [undefined, TEST_ADMIN_TOKEN, ""]) {
        expectApiError(await closed.request("GET", "/api/v1/admin/accounts?email=a@b.ch", { token }), 403, "Forbidden");
      }
    } finally {
      await closed.close();
    }
  });
});

describe("GET /api/v1/admin/accounts?email=", () => {
  it("finds an account by email, whatever its case", async () => {
    const email = newEmail("find");
    const account = await register(app, email);
    const res = await app.request("GET", `/api/v1/admin/accounts?email=${encodeURIComponent(email.toUpperCase())}`, asAdmin);
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({ id: account.id, email, created_at: account.created_at, subscription: { status: "inactive", monthly_budget_chf: 0 } });
  });

  it("answers 404 for an unknown email and 400 without or with a malformed email", async () => {
    expectApiError(await app.request("GET", `/api/v1/admin/accounts?email=${newEmail("nobody")}`, asAdmin), 404, "invalid_request_error", {
      code: "account_not_found",
    });
    expectApiError(await app.request("GET", "/api/v1/admin/accounts", asAdmin), 400, "invalid_request_error", {
      param: "email",
      code: "missing_required_parameter",
    });
    expectApiError(await app.request("GET", "/api/v1/admin/accounts?email=nope", asAdmin), 400, "invalid_request_error", { param: "email" });
  });
});

describe("PUT /api/v1/admin/accounts/{account_id}/subscription", () => {
  it("activates with a budget, appends the events exactly once with admin metadata, and the user sees it", async () => {
    const email = newEmail("sub");
    const account = await register(app, email);
    const res = await app.request("PUT", subscriptionPath(account.id), { body: { status: "active", monthly_budget_chf: 50 }, ...asAdmin });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({ id: account.id, email, created_at: account.created_at, subscription: { status: "active", monthly_budget_chf: 50 } });

    const again = await app.request("PUT", subscriptionPath(account.id), { body: { status: "active", monthly_budget_chf: 50 }, ...asAdmin });
    expect(again.status).toBe(200);
    expect(again.body).toEqual(res.body);

    const events = await accountEvents(app, account.id);
    expect(events.map((e) => e.event_type)).toEqual(["AccountRegistered", "SubscriptionActivated", "MonthlyBudgetSet"]);
    expect(events[2]!.data).toMatchObject({ accountId: account.id, monthlyBudgetMicroChf: 50_000_000 });
    for (const event of events.slice(1)) {
      expect(event.metadata).toEqual({ correlationId: res.headers.get("x-request-id"), actor: "admin:http" });
    }
    expect(JSON.stringify(events)).not.toContain(TEST_ADMIN_TOKEN);

    const me = await app.request("GET", "/api/v1/accounts/user/", { token: await login(app, email) });
    expect(me.body.subscription).toEqual({ status: "active", monthly_budget_chf: 50 });
  });

  it("keeps the budget when only the status changes, and sets fractional budgets exactly", async () => {
    const account = await register(app, newEmail("cancel"));
    await app.request("PUT", subscriptionPath(account.id), { body: { status: "active", monthly_budget_chf: 12.345678 }, ...asAdmin });
    const cancelled = await app.request("PUT", subscriptionPath(account.id.toUpperCase()), { body: { status: "inactive" }, ...asAdmin });
    expect(cancelled.status, cancelled.text).toBe(200);
    expect(cancelled.body.subscription).toEqual({ status: "inactive", monthly_budget_chf: 12.345678 });
    const budgetOnly = await app.request("PUT", subscriptionPath(account.id), { body: { status: "inactive", monthly_budget_chf: 0 }, ...asAdmin });
    expect(budgetOnly.body.subscription).toEqual({ status: "inactive", monthly_budget_chf: 0 });
    expect((await accountEvents(app, account.id)).map((e) => e.event_type)).toEqual([
      "AccountRegistered",
      "SubscriptionActivated",
      "MonthlyBudgetSet",
      "SubscriptionCancelled",
      "MonthlyBudgetSet",
    ]);
  });

  it("takes a budget of 6 decimal places however large (the check is not a float product's)", async () => {
    const account = await register(app, newEmail("precise"));
    const res = await app.request("PUT", subscriptionPath(account.id), { body: { status: "active", monthly_budget_chf: 280681009.90321 }, ...asAdmin });
    expect(res.status, res.text).toBe(200);
  });

  it("answers 404 for an unknown or malformed account id and appends nothing", async () => {
    const before = await totalEvents(app);
    for (const id of [randomUUID(), "not-a-uuid", "1"]) {
      const res = await app.request("PUT", subscriptionPath(id), { body: { status: "active", monthly_budget_chf: 10 }, ...asAdmin });
      expectApiError(res, 404, "invalid_request_error", { code: "account_not_found" });
    }
    expect(await totalEvents(app)).toBe(before);
    const streams = await app.db.pool.query(
      "SELECT count(*)::int AS n FROM es_streams WHERE stream_id NOT IN (SELECT 'account-' || account_id FROM rm_accounts)",
    );
    expect(streams.rows[0].n).toBe(0);
  });

  it.each([
    ["a negative budget", { status: "active", monthly_budget_chf: -1 }, "monthly_budget_chf"],
    ["a budget given as a string", { status: "active", monthly_budget_chf: "50" }, "monthly_budget_chf"],
    ["an unknown status", { status: "paused" }, "status"],
    ["a missing status", { monthly_budget_chf: 10 }, "status"],
    ["an unknown field", { status: "active", plan: "pro" }, "plan"],
    ["a budget finer than a micro-CHF (it would be rounded)", { status: "active", monthly_budget_chf: 0.0000001 }, "monthly_budget_chf"],
    ["a budget of 7 decimal places", { status: "active", monthly_budget_chf: 0.0000145 }, "monthly_budget_chf"],
  ])("answers 400 naming the parameter for %s, and appends nothing", async (_label, body, param) => {
    const account = await register(app, newEmail("bad"));
    const res = await app.request("PUT", subscriptionPath(account.id), { body, ...asAdmin });
    expectApiError(res, 400, "invalid_request_error", { param });
    expect(await accountEvents(app, account.id)).toHaveLength(1);
  });

  it("says a rate limit past its bound is too large, not that it is no integer", async () => {
    const account = await register(app, newEmail("limits"));
    const res = await app.request("PUT", `/api/v1/admin/accounts/${account.id}/rate_limits`, { body: { requests_per_minute: 1e20 }, ...asAdmin });
    expectApiError(res, 400, "invalid_request_error", { param: "requests_per_minute" });
    expect(res.body.error.message).toContain("must be at most 1000000000000");
    expect(res.body.error.message).not.toContain("integer");
    const fractional = await app.request("PUT", `/api/v1/admin/accounts/${account.id}/rate_limits`, { body: { requests_per_minute: 1.5 }, ...asAdmin });
    expect(fractional.body.error.message).toContain("must be an integer");
  });

  it("answers 400 invalid_json for a malformed body", async () => {
    const account = await register(app, newEmail("json"));
    const res = await app.request("PUT", subscriptionPath(account.id), { body: '{"status": active}', ...asAdmin });
    expectApiError(res, 400, "invalid_request_error", { code: "invalid_json" });
    // Valid JSON that is no object is told so, not "could not parse" (a probe sent `null`).
    for (const [body, kind] of [
      ["null", "null"],
      ["42", "a number"],
      ['"x"', "a string"],
    ]) {
      const scalar = await app.request("PUT", subscriptionPath(account.id), { body: body!, headers: { "content-type": "application/json" }, ...asAdmin });
      expectApiError(scalar, 400, "invalid_request_error", { code: "invalid_json" });
      expect(scalar.body.error.message).toBe(`The request body must be a JSON object; it is valid JSON, but ${kind}.`);
    }
  });
});
