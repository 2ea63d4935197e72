import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createKey } from "../keys/keySteps.ts";
import { eventually } from "../support/eventually.ts";
import { ADMIN_DATABASE_URL } from "../support/templateDatabase.ts";
import { createTestAccount, type TestAccount } from "../support/testAccounts.ts";
import { startTestApp, type TestApp } from "../support/testApp.ts";
import { type ProxyMode, startTcpProxy, type TcpProxy } from "../support/tcpProxy.ts";
import { expectDependencyUnavailable, expectNotReady, expectReady, timed } from "./faultSteps.ts";

/**
 * The API's pool reaches PostgreSQL through a TCP proxy that can refuse connections (server gone) or
 * black-hole them (packets silently dropped, on new and open connections alike). Either way every
 * request that needs the database (registration, which hashes a password first, included) answers 503
 * database_unavailable within 2 s, /readyz says PostgreSQL
 * is down, and the API serves again once the proxy passes traffic.
 */
let proxy: TcpProxy;
let app: TestApp;
let account: TestAccount;
let apiKey: string;

beforeAll(async () => {
  const admin = new URL(ADMIN_DATABASE_URL);
  proxy = await startTcpProxy({ host: admin.hostname, port: Number(admin.port || 5432) });
  // No key cache: every API-key request reads the database.
  app = await startTestApp({ databaseUrl: (url) => proxy.rewrite(url), keyAuth: { cacheTtlMs: 0 } });
  account = await createTestAccount(app.db.pool);
  apiKey = (await createKey(app, account.sessionToken)).key;
});
afterAll(async () => {
  await proxy?.setMode("pass");
  await app?.close();
  await proxy?.close();
});

const accountView = () => app.request("GET", "/api/v1/accounts/user", { token: account.sessionToken });
const models = () => app.request("GET", "/v1/models", { token: apiKey });
let registrations = 0;
const register = () =>
  app.request("POST", "/api/v1/accounts/register", { body: { email: `outage-${registrations++}@example.test`, password: "correct horse battery staple" } });

describe("PostgreSQL outage", () => {
  it.each<ProxyMode>(["refuse", "blackhole"])("answers 503 within 2 s while PostgreSQL is unreachable (%s), then recovers", async (mode) => {
    expect((await accountView()).status).toBe(200);
    expect((await models()).status).toBe(200);
    await expectReady(app);

    await proxy.setMode(mode);
    // Twice: the first round meets the pooled connections, the second new ones.
    for (let round = 0; round < 2; round++) {
      const [session, key, registration] = await Promise.all([timed(accountView()), timed(models()), timed(register())]);
      expectDependencyUnavailable(session, "database_unavailable", `session route (${mode}, round ${round})`);
      expectDependencyUnavailable(key, "database_unavailable", `API-key route (${mode}, round ${round})`);
      // Registration hashes the password (scrypt, 0.3-0.5 s) before it writes: that must not add up.
      expectDependencyUnavailable(registration, "database_unavailable", `registration (${mode}, round ${round})`);
      await expectNotReady(app, { postgres: "down", redis: "ok" });
    }

    await proxy.setMode("pass");
    await eventually(async () => ((await accountView()).status === 200 ? true : undefined), 10_000);
    expect((await models()).status).toBe(200);
    expect((await register()).status).toBe(201);
    await expectReady(app);
  });
});
