import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newApiKeySecret } from "../../src/api/keys/apiKeySecret.ts";
import { expectApiError, newEmail, PASSWORD } from "../accounts/accountSteps.ts";
import { startTestApp, type TestApp } from "../support/testApp.ts";

const LIMITS = { REGISTRATIONS_PER_ADDRESS: "3", API_KEY_FAILURES_PER_ADDRESS: "3" };

let direct: TestApp;
let proxied: TestApp;
beforeAll(async () => {
  // No TRUST_PROXY_HOPS: the default, as in the README's quick start (nothing in front of the API).
  direct = await startTestApp({ env: LIMITS });
  proxied = await startTestApp({ env: { ...LIMITS, TRUST_PROXY_HOPS: "1" } });
});
afterAll(async () => {
  await direct?.close();
  await proxied?.close();
});

let forged = 0;
const forgedAddress = () => `203.0.113.${++forged}`;
const register = (app: TestApp, address: string) =>
  app.request("POST", "/api/v1/accounts/register", { body: { email: newEmail("xff"), password: PASSWORD }, headers: { "x-forwarded-for": address } });

describe("X-Forwarded-For", () => {
  it("is ignored by default: the per-address limits count the socket's address, whatever the header says", async () => {
    for (let i = 0; i < 3; i++) expect((await register(direct, forgedAddress())).status).toBe(201);
    expectApiError(await register(direct, forgedAddress()), 429, "rate_limit_exceeded", { param: null });

    const models = () => direct.request("GET", "/v1/models", { token: newApiKeySecret(), headers: { "x-forwarded-for": forgedAddress() } });
    for (let i = 0; i < 3; i++) expect((await models()).status).toBe(403);
    expectApiError(await models(), 429, "rate_limit_exceeded", { code: "too_many_invalid_api_keys" });
  });

  it("gives the client address when TRUST_PROXY_HOPS says a proxy is in front", async () => {
    for (let i = 0; i < 5; i++) expect((await register(proxied, forgedAddress())).status).toBe(201);
    const one = forgedAddress();
    for (let i = 0; i < 3; i++) expect((await register(proxied, one)).status).toBe(201);
    expectApiError(await register(proxied, one), 429, "rate_limit_exceeded", { param: null });
  });
});
