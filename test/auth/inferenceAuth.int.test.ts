import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newApiKeySecret } from "../../src/api/keys/apiKeySecret.ts";
import { createKey, expectError, KEYS_PATH } from "../keys/keySteps.ts";
import { createTestAccount, setTestSubscription } from "../support/testAccounts.ts";
import { startTestApp, type TestApp } from "../support/testApp.ts";

/** A long cache TTL: every "refused at once" below must come from invalidation, not from expiry. */
let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ keyAuth: { cacheTtlMs: 60_000 } });
});
afterAll(async () => {
  await app.close();
});

const models = (token?: string, headers?: Record<string, string>) => app.request("GET", "/v1/models", { token, headers });

describe("inference authentication on /v1/*", () => {
  it("refuses a missing, malformed, unknown or checksum-broken key with 403 Forbidden", async () => {
    const account = await createTestAccount(app.db.pool);
    const real = await createKey(app, account.sessionToken);
    const unknown = newApiKeySecret();
    const last = unknown.at(-1) === "a" ? "b" : "a";
    const badChecksum = `${real.key.slice(0, -1)}${real.key.at(-1) === "a" ? "b" : "a"}`;
    const cases: { token?: string; headers?: Record<string, string> }[] = [
      {},
      { token: "garbage" },
      { token: unknown },
      { token: `${unknown.slice(0, -1)}${last}` },
      { token: badChecksum },
      { token: account.sessionToken },
      { headers: { authorization: `Basic ${real.key}` } },
      { headers: { authorization: real.key } },
    ];
    for (const { token, headers } of cases) {
      expectError(await models(token, headers), 403, "Forbidden");
    }
    // A Bearer header with more than one token is a malformed key, not a missing one.
    const extra = await models(undefined, { authorization: `Bearer ${real.key} extra` });
    expectError(extra, 403, "Forbidden", { code: "invalid_api_key" });
    expectError(await models(undefined, {}), 403, "Forbidden", { code: "missing_api_key" });
    // Unknown paths under /v1 are guarded too.
    expectError(await app.request("POST", "/v1/chat/completions", { body: {} }), 403, "Forbidden");
  });

  it("lets a key in the moment it is created and sets the principal", async () => {
    const account = await createTestAccount(app.db.pool);
    const key = await createKey(app, account.sessionToken);
    const res = await models(key.key);
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({ object: "list", data: [] });
    expect((await app.request("GET", "/v1/nothing-here", { token: key.key })).status).toBe(404);
  });

  it("refuses a revoked key at once, even right after it was used and cached", async () => {
    const account = await createTestAccount(app.db.pool);
    const key = await createKey(app, account.sessionToken);
    const other = await createKey(app, account.sessionToken, "other");
    expect((await models(key.key)).status).toBe(200);
    expect((await models(key.key)).status).toBe(200);
    // The keys' creations are published on the invalidation channel too and clear the cache when they
    // arrive: ask until the key stays cached.
    await expect
      .poll(async () => {
        expect((await models(other.key)).status).toBe(200);
        expect((await models(key.key)).status).toBe(200);
        await new Promise((resolve) => setTimeout(resolve, 50));
        return app.deps.keyAuth.cache.size;
      })
      .toBeGreaterThan(0);

    const revoke = await app.request("POST", `${KEYS_PATH}${key.id}/revoke/`, { token: account.sessionToken });
    expect(revoke.status, revoke.text).toBe(200);
    expectError(await models(key.key), 403, "Forbidden");
    expect((await models(other.key)).status).toBe(200);
  });

  it("answers 402 subscription_required (message and type only) for an account without a subscription", async () => {
    const account = await createTestAccount(app.db.pool, { subscription: "inactive" });
    const key = await createKey(app, account.sessionToken);
    const res = await models(key.key);
    expect(res.status, res.text).toBe(402);
    expect(res.body).toEqual({ error: { message: expect.any(String), type: "subscription_required" } });

    await setTestSubscription(app.db.pool, account.accountId, "active");
    expect((await models(key.key)).status).toBe(200);
  });

  it("answers 402 on the next request after the subscription is cancelled (invalidation contract)", async () => {
    const account = await createTestAccount(app.db.pool);
    const key = await createKey(app, account.sessionToken);
    expect((await models(key.key)).status).toBe(200);
    await setTestSubscription(app.db.pool, account.accountId, "inactive");
    // What every path that cancels a subscription does after the commit.
    await app.deps.keyAuth.invalidateAccount(account.accountId);
    const res = await models(key.key);
    expect(res.status, res.text).toBe(402);
    expect(res.body).toEqual({ error: { message: expect.any(String), type: "subscription_required" } });
  });
});

describe("cache safety net", () => {
  it("notices a cancelled subscription without any invalidation once the short TTL passes", async () => {
    const shortTtl = await startTestApp({ keyAuth: { cacheTtlMs: 50 } });
    try {
      const account = await createTestAccount(shortTtl.db.pool);
      const key = await createKey(shortTtl, account.sessionToken);
      expect((await shortTtl.request("GET", "/v1/models", { token: key.key })).status).toBe(200);
      await setTestSubscription(shortTtl.db.pool, account.accountId, "inactive");
      let status = 0;
      for (let attempt = 0; attempt < 100 && status !== 402; attempt++) {
        await new Promise((r) => setTimeout(r, 20));
        status = (await shortTtl.request("GET", "/v1/models", { token: key.key })).status;
      }
      expect(status).toBe(402);
    } finally {
      await shortTtl.close();
    }
  });

  it("re-reads a key in use in the background after half its TTL: the request is served from the cache, the change applies right after", async () => {
    const ttlMs = 2_000;
    const app = await startTestApp({ keyAuth: { cacheTtlMs: ttlMs } });
    try {
      const account = await createTestAccount(app.db.pool);
      const key = await createKey(app, account.sessionToken);
      const cachedAt = performance.now();
      expect((await app.request("GET", "/v1/models", { token: key.key })).status).toBe(200);
      // A change whose invalidation message was lost: only the refresh can notice it.
      await setTestSubscription(app.db.pool, account.accountId, "inactive");
      await new Promise((r) => setTimeout(r, ttlMs / 2 + 100));
      // Due for refresh: answered from the cache at once, the refresh runs behind it.
      expect((await app.request("GET", "/v1/models", { token: key.key })).status).toBe(200);
      let status = 0;
      while (status !== 402 && performance.now() - cachedAt < ttlMs - 200) {
        await new Promise((r) => setTimeout(r, 10));
        status = (await app.request("GET", "/v1/models", { token: key.key })).status;
      }
      // Refused before the entry's TTL ran out: the background refresh dropped it.
      expect(status).toBe(402);
    } finally {
      await app.close();
    }
  });
});
