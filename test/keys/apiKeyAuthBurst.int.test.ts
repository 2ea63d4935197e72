import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestAccount } from "../support/testAccounts.ts";
import { startTestApp, type TestApp } from "../support/testApp.ts";
import { createKey } from "./keySteps.ts";

/**
 * A burst of requests with one key whose cache entry has expired: every request looked the key up on
 * its own, the pool's wait ran past its connect timeout, and some were answered 503
 * database_unavailable with PostgreSQL healthy (a probe: 13 to 22 of 250). They share one lookup.
 */
let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ keyAuth: { cacheTtlMs: 200 } });
});
afterAll(async () => {
  await app?.close();
});

describe("API-key authentication under a burst on a cold cache", () => {
  it("looks the key up once for the requests that miss together, and each is authorized", async () => {
    const { key } = await createKey(app, (await createTestAccount(app.db.pool)).sessionToken);
    await new Promise((resolve) => setTimeout(resolve, 300));
    let acquired = 0;
    const count = () => {
      acquired++;
    };
    app.deps.pool.on("acquire", count);
    try {
      const results = await Promise.all(Array.from({ length: 100 }, () => app.deps.keyAuth!.authenticate(key)));
      expect(results.every((r) => r.outcome === "authorized")).toBe(true);
    } finally {
      app.deps.pool.off("acquire", count);
    }
    expect(acquired).toBeLessThanOrEqual(2);
  });

  it("does not share a lookup begun before a revocation with a request after it", async () => {
    const account = await createTestAccount(app.db.pool);
    const { key, id } = await createKey(app, account.sessionToken);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const before = app.deps.keyAuth!.authenticate(key);
    const revoked = await app.request("POST", `/api/v1/accounts/user/api-keys/${id}/revoke`, { token: account.sessionToken });
    expect(revoked.status).toBe(200);
    const after = await app.deps.keyAuth!.authenticate(key);
    await before;
    expect(after.outcome).toBe("forbidden");
  });
});
