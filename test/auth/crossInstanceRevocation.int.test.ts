import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createKey, expectError, KEYS_PATH } from "../keys/keySteps.ts";
import { createTestAccount, setTestSubscription } from "../support/testAccounts.ts";
import { startTestApp, type TestApp } from "../support/testApp.ts";

/** Two API instances on one database and one Redis prefix, each with its own cache (long TTL). */
let first: TestApp;
let second: TestApp;
beforeAll(async () => {
  first = await startTestApp({ keyAuth: { cacheTtlMs: 60_000 } });
  second = await startTestApp({ shareWith: first, keyAuth: { cacheTtlMs: 60_000 } });
});
afterAll(async () => {
  await second?.close();
  await first?.close();
});

describe("auth cache invalidation across API instances", () => {
  it("a key revoked through one instance is refused by the other at once (pub/sub)", async () => {
    const account = await createTestAccount(first.db.pool);
    const key = await createKey(first, account.sessionToken);
    expect((await first.request("GET", "/v1/models", { token: key.key })).status).toBe(200);
    expect((await second.request("GET", "/v1/models", { token: key.key })).status).toBe(200);
    expect(second.deps.keyAuth.cache.size).toBe(1);

    const revoke = await first.request("POST", `${KEYS_PATH}${key.id}/revoke/`, { token: account.sessionToken });
    expect(revoke.status, revoke.text).toBe(200);
    expectError(await second.request("GET", "/v1/models", { token: key.key }), 403, "Forbidden");
    expectError(await first.request("GET", "/v1/models", { token: key.key }), 403, "Forbidden");
  });

  it("a cancelled subscription announced by one instance is enforced by the other within milliseconds", async () => {
    const account = await createTestAccount(first.db.pool);
    const key = await createKey(first, account.sessionToken);
    expect((await second.request("GET", "/v1/models", { token: key.key })).status).toBe(200);
    await setTestSubscription(first.db.pool, account.accountId, "inactive");
    const announcedAt = performance.now();
    await first.deps.keyAuth.invalidateAccount(account.accountId);
    // Pub/sub delivery to the other instance is asynchronous: the publish is acknowledged before the
    // other subscriber has necessarily handled it, so allow it a moment (far below the 60 s TTL).
    let res = await second.request("GET", "/v1/models", { token: key.key });
    while (res.status === 200 && performance.now() - announcedAt < 1_000) {
      await new Promise((r) => setTimeout(r, 5));
      res = await second.request("GET", "/v1/models", { token: key.key });
    }
    expect(res.status, res.text).toBe(402);
  });
});
