import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { login, newEmail, register } from "../accounts/accountSteps.ts";
import { createKey } from "../keys/keySteps.ts";
import { startTestApp, TEST_ADMIN_TOKEN, type TestApp } from "../support/testApp.ts";

// The "done when" walk: register, operator grants a subscription, log in, create a key, use it,
// operator cancels (refused at once, even with a long auth cache), re-activates, revoke -> 403.
let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ keyAuth: { cacheTtlMs: 60_000 } });
});
afterAll(async () => {
  await app.close();
});

describe("operator and user walk through the account lifecycle", () => {
  it("applies subscription changes and revocation to inference calls at once", async () => {
    const email = newEmail("walk");
    const account = await register(app, email);
    const setSubscription = (status: "active" | "inactive") =>
      app.request("PUT", `/api/v1/admin/accounts/${account.id}/subscription`, {
        token: TEST_ADMIN_TOKEN,
        body: { status, monthly_budget_chf: 25 },
      });
    expect((await setSubscription("active")).body.subscription).toEqual({ status: "active", monthly_budget_chf: 25 });
    const session = await login(app, email);
    const key = await createKey(app, session, "walk key");

    const list = await app.request("GET", "/api/v1/accounts/user/api-keys/", { token: session });
    expect(list.body.data.map((k: { masked_key: string }) => k.masked_key)).toEqual([`sk-${"*".repeat(16)}${key.key.slice(-4)}`]);
    expect(list.text).not.toContain(key.key);

    expect((await app.request("GET", "/v1/models", { token: key.key })).status).toBe(200);
    expect((await setSubscription("inactive")).status).toBe(200);
    const refused = await app.request("GET", "/v1/models", { token: key.key });
    expect(refused.status).toBe(402);
    expect(refused.body).toEqual({ error: { message: expect.any(String), type: "subscription_required" } });

    expect((await setSubscription("active")).status).toBe(200);
    expect((await app.request("GET", "/v1/models", { token: key.key })).status).toBe(200);

    expect((await app.request("POST", `/api/v1/accounts/user/api-keys/${key.id}/revoke/`, { token: session })).status).toBe(200);
    const revoked = await app.request("GET", "/v1/models", { token: key.key });
    expect(revoked.status).toBe(403);
    expect(revoked.body.error.type).toBe("Forbidden");
  });
});
