import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { newApiKeySecret } from "../../src/api/keys/apiKeySecret.ts";
import { createKey, expectError } from "../keys/keySteps.ts";
import { eventually } from "../support/eventually.ts";
import { createTestAccount } from "../support/testAccounts.ts";
import { startTestApp, type TestApp } from "../support/testApp.ts";

let app: TestApp;
let second: TestApp;
beforeAll(async () => {
  // A long cache TTL: the refusals below are served from the cache, and only invalidation clears it.
  // One trusted proxy hop: X-Forwarded-For gives each request a client address of its own.
  app = await startTestApp({ keyAuth: { cacheTtlMs: 60_000 }, env: { API_KEY_FAILURES_PER_ADDRESS: "5", TRUST_PROXY_HOPS: "1" } });
  second = await startTestApp({ shareWith: app, keyAuth: { cacheTtlMs: 60_000 }, env: { TRUST_PROXY_HOPS: "1" } });
});
afterAll(async () => {
  await second?.close();
  await app?.close();
});
afterEach(() => {
  vi.restoreAllMocks();
});

let addressCounter = 0;
const newAddress = () => `203.0.113.${++addressCounter}`;
const models = (target: TestApp, key: string, address: string) => target.request("GET", "/v1/models", { token: key, headers: { "x-forwarded-for": address } });

/** Counts the key lookups (rm_keys by hash) the app's real pool runs. */
function countKeyLookups(target: TestApp): () => number {
  const query = vi.spyOn(target.deps.pool, "query");
  return () => query.mock.calls.filter(([sql]) => typeof sql === "string" && /FROM rm_keys k/.test(sql)).length;
}

describe("unknown API keys", () => {
  it("costs one database lookup per unknown key, not one per request", async () => {
    const lookups = countKeyLookups(app);
    const unknown = newApiKeySecret();
    for (let i = 0; i < 4; i += 1) expectError(await models(app, unknown, newAddress()), 403, "Forbidden", { code: "invalid_api_key" });
    expect(lookups()).toBe(1);
  });

  it("lets a key created just now in at once, on this process and on another one", async () => {
    for (let i = 0; i < 3; i += 1) expectError(await models(second, newApiKeySecret(), newAddress()), 403, "Forbidden");
    expect(second.deps.keyAuth.refused.size).toBeGreaterThan(0);
    for (let i = 0; i < 3; i += 1) expectError(await models(app, newApiKeySecret(), newAddress()), 403, "Forbidden");
    const account = await createTestAccount(app.db.pool);
    const key = await createKey(app, account.sessionToken);
    // The creating process cleared its refusals synchronously; the other one hears it over Redis.
    expect(app.deps.keyAuth.refused.size).toBe(0);
    expect((await models(app, key.key, newAddress())).status).toBe(200);
    await eventually(async () => (second.deps.keyAuth.refused.size === 0 ? true : undefined), 5000);
    expect((await models(second, key.key, newAddress())).status).toBe(200);
  });

  it("answers 429 after too many refused keys from one address, without a lookup, while other addresses and cached keys go on", async () => {
    const account = await createTestAccount(app.db.pool);
    const cachedKey = await createKey(app, account.sessionToken, "warm");
    const coldKey = await createKey(app, account.sessionToken, "cold");
    const attacker = newAddress();
    expect((await models(app, cachedKey.key, attacker)).status).toBe(200);
    for (let i = 0; i < 5; i += 1) expectError(await models(app, newApiKeySecret(), attacker), 403, "Forbidden");

    const lookups = countKeyLookups(app);
    const refused = await models(app, newApiKeySecret(), attacker);
    expectError(refused, 429, "rate_limit_exceeded", { code: "too_many_invalid_api_keys", param: null });
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
    expectError(await models(app, newApiKeySecret(), attacker), 429, "rate_limit_exceeded");
    // Made-up keys, each different: none of them is looked up for that address any more.
    expect(lookups()).toBe(0);
    // A key created a moment ago and never used yet is valid from its creation on: served from the
    // blocked address too (the colleague of someone trying made-up keys behind the same address).
    expect((await models(app, coldKey.key, attacker)).status).toBe(200);

    expect((await models(app, cachedKey.key, attacker)).status).toBe(200);
    expect((await models(app, coldKey.key, newAddress())).status).toBe(200);
    expectError(await models(app, newApiKeySecret(), newAddress()), 403, "Forbidden");

    // A colleague's key that authenticated before (here, from another address) and is in no process's
    // cache any more (another API process, or two seconds later) is looked up from the blocked address too.
    app.deps.keyAuth.cache.clear();
    expect((await models(app, coldKey.key, attacker)).status).toBe(200);
    expectError(await models(app, newApiKeySecret(), attacker), 429, "rate_limit_exceeded");
  });

  it("limits one refused key sent again and again from an address, and only that key: the address's valid keys go on", async () => {
    const account = await createTestAccount(app.db.pool);
    const stale = await createKey(app, account.sessionToken, "stale");
    const valid = await createKey(app, account.sessionToken, "valid");
    const revoke = await app.request("POST", `/api/v1/accounts/user/api-keys/${stale.id}/revoke`, { token: account.sessionToken });
    expect(revoke.status, revoke.text).toBeLessThan(300);
    const office = newAddress();
    for (let i = 0; i < 5; i += 1) expectError(await models(app, stale.key, office), 403, "Forbidden", { code: "invalid_api_key" });
    for (let i = 0; i < 25; i += 1) expectError(await models(app, stale.key, office), 429, "rate_limit_exceeded", { code: "too_many_invalid_api_keys" });

    // Valid keys from the same address: one this process has not seen yet, and one created only now.
    expect((await models(app, valid.key, office)).status).toBe(200);
    const created = await createKey(app, account.sessionToken, "created after");
    expect((await models(app, created.key, office)).status).toBe(200);
    expect((await models(second, created.key, office)).status).toBe(200);
    // The stale key stays limited, without a lookup.
    const lookups = countKeyLookups(app);
    expectError(await models(app, stale.key, office), 429, "rate_limit_exceeded", { code: "too_many_invalid_api_keys" });
    expect(lookups()).toBe(0);
  });
});
