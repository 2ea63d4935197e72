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

  it("counts one client's forms of its address as one (with a port, IPv4-mapped): each was an address of its own", async () => {
    const address = forgedAddress();
    const forms = [address, `${address}:1234`, `::ffff:${address}`, `[::ffff:${address}]:80`];
    const models = (form: string) => proxied.request("GET", "/v1/models", { token: newApiKeySecret(), headers: { "x-forwarded-for": form } });
    for (const form of forms.slice(0, 3)) expect((await models(form)).status).toBe(403);
    expectApiError(await models(forms[3]!), 429, "rate_limit_exceeded", { code: "too_many_invalid_api_keys" });
  });
});

describe("an IPv6 client behind the proxy", () => {
  it("counts as its /64, whatever address of it or spelling it comes from (each counted apart: no limit at all)", async () => {
    const forms = ["2001:db8:77:1::1", "2001:DB8:77:1:0:0:0:2", "[2001:db8:77:1::3]:443", "2001:db8:77:1::4%eth0"];
    const models = (form: string) => proxied.request("GET", "/v1/models", { token: newApiKeySecret(), headers: { "x-forwarded-for": form } });
    for (const form of forms.slice(0, 3)) expect((await models(form)).status).toBe(403);
    expectApiError(await models(forms[3]!), 429, "rate_limit_exceeded", { code: "too_many_invalid_api_keys" });
    // Another /64 is another client.
    expect((await models("2001:db8:77:2::1")).status).toBe(403);
  });
});

describe("the Authorization header", () => {
  it("sent twice is refused 400 (the first was used, a proxy in front may read the last)", async () => {
    const { port } = new URL(direct.baseUrl);
    const { connect } = await import("node:net");
    const head = await new Promise<string>((resolve, reject) => {
      const socket = connect(Number(port), "127.0.0.1");
      let received = "";
      socket.setEncoding("utf8");
      socket.on("data", (data: string) => {
        received += data;
        if (received.includes("\r\n\r\n")) {
          socket.destroy();
          resolve(received);
        }
      });
      socket.on("error", reject);
      const [one, two] = [newApiKeySecret(), newApiKeySecret()];
      socket.write(`GET /v1/models HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${one}\r\nauthorization: Bearer ${two}\r\n\r\n`);
    });
    expect(head).toMatch(/^HTTP\/1\.1 400 /);
  });
});
