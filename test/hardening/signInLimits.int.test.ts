import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { passwordHasher } from "../../src/api/accounts/passwordHasher.ts";
import { startTestApp, type TestApp, type TestResponse } from "../support/testApp.ts";
import { expectApiError, newEmail, PASSWORD } from "../accounts/accountSteps.ts";

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({
    env: {
      LOGIN_ATTEMPTS_PER_ACCOUNT_ADDRESS: "3",
      LOGIN_ATTEMPTS_PER_ACCOUNT: "6",
      LOGIN_ATTEMPTS_PER_ADDRESS: "5",
      REGISTRATIONS_PER_ADDRESS: "3",
      PASSWORD_HASH_MAX_WAITING: "3",
      TRUST_PROXY_HOPS: "1",
    },
  });
});
afterAll(async () => {
  await app.close();
});

let addressCounter = 0;
/** A client address of its own (this app trusts one proxy hop: X-Forwarded-For). */
const newAddress = () => `198.51.100.${++addressCounter}`;

function login(email: string, password: string, address: string, device?: string): Promise<TestResponse> {
  return app.request("POST", "/api/v1/accounts/login", {
    body: { email, password },
    headers: { "x-forwarded-for": address, ...(device === undefined ? {} : { cookie: device }) },
  });
}

/** The device cookie a successful login left (`login_device=...`), as a browser would send it back. */
function deviceCookieOf(res: TestResponse): string {
  const cookie = res.headers.getSetCookie().find((c) => c.startsWith("login_device="));
  expect(cookie, "a login_device cookie").toBeDefined();
  expect(cookie).toMatch(/HttpOnly/i);
  expect(cookie).toMatch(/SameSite=Strict/i);
  return cookie!.split(";")[0]!;
}

function registerFrom(email: string, address: string): Promise<TestResponse> {
  return app.request("POST", "/api/v1/accounts/register", { body: { email, password: PASSWORD }, headers: { "x-forwarded-for": address } });
}

function expectTooMany(res: TestResponse, code: string): void {
  expectApiError(res, 429, "rate_limit_exceeded", { code, param: null });
  const retryAfter = Number(res.headers.get("retry-after"));
  expect(Number.isInteger(retryAfter) && retryAfter > 0, `retry-after ${res.headers.get("retry-after")}`).toBe(true);
}

async function registerAt(address: string): Promise<string> {
  const email = newEmail("limit");
  const res = await registerFrom(email, address);
  expect(res.status, res.text).toBe(201);
  return email;
}

describe("login rate limits", () => {
  it("refuses a 4th attempt on one account from one address with 429, even with the right password; another address still logs in", async () => {
    const email = await registerAt(newAddress());
    const attacker = newAddress();
    for (let i = 0; i < 3; i += 1) expectApiError(await login(email, "wrong password!", attacker), 401, "authentication_error");
    expectTooMany(await login(email, "wrong password!", attacker), "too_many_login_attempts");
    expectTooMany(await login(email, PASSWORD, attacker), "too_many_login_attempts");
    expect((await login(email, PASSWORD, newAddress())).status).toBe(200);
  });

  it("does not count successful logins against the client", async () => {
    const email = await registerAt(newAddress());
    const address = newAddress();
    for (let round = 0; round < 2; round += 1) {
      expectApiError(await login(email, "wrong password!", address), 401, "authentication_error");
      expectApiError(await login(email, "wrong password!", address), 401, "authentication_error");
      expect((await login(email, PASSWORD, address)).status).toBe(200);
    }
  });

  it("limits one account across addresses (a distributed guess)", async () => {
    const email = await registerAt(newAddress());
    const statuses: number[] = [];
    for (let i = 0; i < 7; i += 1) statuses.push((await login(email, "wrong password!", newAddress())).status);
    expect(statuses).toEqual([401, 401, 401, 401, 401, 401, 429]);
  });

  it("limits one address across accounts, unknown emails included", async () => {
    const address = newAddress();
    const statuses: number[] = [];
    for (let i = 0; i < 6; i += 1) statuses.push((await login(newEmail("nobody"), "wrong password!", address)).status);
    expect(statuses).toEqual([401, 401, 401, 401, 401, 429]);
    expectTooMany(await login(newEmail("nobody"), "wrong password!", address), "too_many_login_attempts");
  });

  it("counts nothing against an account for logins its address's own limit refuses (a blocked address took accounts past their limit)", async () => {
    const victim = await registerAt(newAddress());
    const blocked = newAddress();
    for (let i = 0; i < 5; i += 1) await login(newEmail("nobody"), "wrong password!", blocked);
    for (let i = 0; i < 10; i += 1) expectTooMany(await login(victim, "wrong password!", blocked), "too_many_login_attempts");
    // The account's own limit (6, all addresses) is untouched: a distributed guess still gets its 6 tries, and the owner logs in.
    const statuses: number[] = [];
    for (let i = 0; i < 5; i += 1) statuses.push((await login(victim, "wrong password!", newAddress())).status);
    expect(statuses).toEqual([401, 401, 401, 401, 401]);
    expect((await login(victim, PASSWORD, newAddress())).status).toBe(200);
  });

  it("lets a client that logged in before (its device cookie) log in through a flooded address and a locked account; without it, 429", async () => {
    const owner = await registerAt(newAddress());
    const office = newAddress();
    const first = await login(owner, PASSWORD, office);
    expect(first.status).toBe(200);
    const device = deviceCookieOf(first);
    // An attacker behind the same address: wrong passwords across accounts (the address's limit) and on
    // the owner's account (its limits, from this address and from others).
    for (let i = 0; i < 6; i += 1) await login(newEmail("nobody"), "wrong password!", office);
    for (let i = 0; i < 7; i += 1) await login(owner, "wrong password!", newAddress());
    expectTooMany(await login(owner, PASSWORD, office), "too_many_login_attempts");
    expectTooMany(await login(owner, PASSWORD, newAddress()), "too_many_login_attempts");
    // The owner's browser still gets in, from the office and from anywhere, and keeps its cookie.
    const again = await login(owner, PASSWORD, office, device);
    expect(again.status, again.text).toBe(200);
    expect(deviceCookieOf(again)).toBe(device);
    expect((await login(owner, PASSWORD, newAddress(), device)).status).toBe(200);
  });

  it("limits a device cookie on its own, and only for its own account", async () => {
    const owner = await registerAt(newAddress());
    const other = await registerAt(newAddress());
    const device = deviceCookieOf(await login(owner, PASSWORD, newAddress()));
    // Another account's login with it is an ordinary one: the address's limits apply.
    const address = newAddress();
    for (let i = 0; i < 3; i += 1) expectApiError(await login(other, "wrong password!", address, device), 401, "authentication_error");
    expectTooMany(await login(other, PASSWORD, address, device), "too_many_login_attempts");
    // Guessing with the owner's cookie: its own limit (3 here), whatever the address.
    for (let i = 0; i < 3; i += 1) expectApiError(await login(owner, "wrong password!", newAddress(), device), 401, "authentication_error");
    expectTooMany(await login(owner, PASSWORD, newAddress(), device), "too_many_login_attempts");
    // A made-up cookie is no device: the ordinary limits.
    expect((await login(owner, PASSWORD, newAddress(), "login_device=dev_madeupmadeupmadeupmadeupmadeupma")).status).toBe(200);
  });

  it("keeps a real login fast while 64 parallel wrong logins hit another account", async () => {
    const victim = await registerAt(newAddress());
    const user = await registerAt(newAddress());
    const started = performance.now();
    expect((await login(user, PASSWORD, newAddress())).status).toBe(200);
    const alone = performance.now() - started;

    const attacker = newAddress();
    const burst = Array.from({ length: 64 }, () => login(victim, "wrong password!", attacker));
    await new Promise((resolve) => setTimeout(resolve, 20));
    const underBurstStart = performance.now();
    const real = await login(user, PASSWORD, newAddress());
    const underBurst = performance.now() - underBurstStart;
    expect(real.status, real.text).toBe(200);
    // It waits for at most the hashes already running or ahead of it from the attacker's address.
    expect(underBurst, `alone ${alone.toFixed(0)} ms, under the burst ${underBurst.toFixed(0)} ms`).toBeLessThan(4 * alone + 500);

    const results = await Promise.all(burst);
    for (const res of results) {
      expect([401, 429, 503], res.text).toContain(res.status);
      expect(Object.keys(res.body.error).sort()).toEqual(["code", "message", "param", "type"]);
      if (res.status !== 401) expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(0);
    }
    expect(results.filter((r) => r.status === 401).length).toBeLessThanOrEqual(3);
    expect(results.filter((r) => r.status === 503).every((r) => r.body.error.code === "too_many_password_checks")).toBe(true);
  });
});

describe("password hashing capacity", () => {
  it("gives back the attempts it refused 503 without checking: they do not bring the address to its lockout", async () => {
    const user = await registerAt(newAddress());
    const address = newAddress();
    // Five wrong logins at once from one address (its limit: 5), on emails of nobody: the hashing gate
    // checks some and refuses the rest 503; only those checked count.
    const burst = await Promise.all(Array.from({ length: 5 }, () => login(newEmail("nobody"), "wrong password!", address)));
    const checked = burst.filter((r) => r.status === 401).length;
    expect(burst.filter((r) => r.status === 503).length).toBeGreaterThan(0);
    expect(checked).toBeLessThan(5);
    // The address has attempts left: a good login from it passes (every one of the five counted: 429).
    const real = await login(user, PASSWORD, address);
    expect(real.status, real.text).toBe(200);
  });

  it("answers checks beyond what may wait 503 at once, with Retry-After, instead of queueing them for seconds", async () => {
    // 12 addresses, 12 unknown emails: no rate limit applies, only the hashing gate (1 at a time, 3 waiting).
    const timed = await Promise.all(
      Array.from({ length: 12 }, async () => {
        const started = performance.now();
        const res = await login(newEmail("nobody"), "wrong password!", newAddress());
        return { res, ms: performance.now() - started };
      }),
    );
    const busy = timed.filter((t) => t.res.status === 503);
    expect(busy.length).toBeGreaterThanOrEqual(12 - 4);
    const slowestHash = Math.max(...timed.filter((t) => t.res.status === 401).map((t) => t.ms));
    for (const { res, ms } of busy) {
      expectApiError(res, 503, "service_unavailable", { code: "too_many_password_checks" });
      expect(res.headers.get("retry-after")).toBe("1");
      expect(ms).toBeLessThan(slowestHash);
    }
    expect(timed.every((t) => t.res.status === 401 || t.res.status === 503)).toBe(true);
  });

  it("lets a client with its device cookie wait its turn while a flood from many addresses fills what may wait", async () => {
    const owner = await registerAt(newAddress());
    const office = newAddress();
    const device = deviceCookieOf(await login(owner, PASSWORD, office));
    const flood = Array.from({ length: 12 }, () => login(newEmail("nobody"), "wrong password!", newAddress()));
    await new Promise((resolve) => setTimeout(resolve, 50));
    const own = await login(owner, PASSWORD, office, device);
    expect(own.status, own.text).toBe(200);
    const results = await Promise.all(flood);
    // The flood did fill what may wait: some of it was refused.
    expect(results.filter((r) => r.status === 503).length).toBeGreaterThan(0);
  });
});

describe("registration rate limit", () => {
  it("counts every registration from an address, email_taken included, and answers 429 beyond it", async () => {
    const address = newAddress();
    const email = newEmail("reg");
    expect((await registerFrom(email, address)).status).toBe(201);
    expectApiError(await registerFrom(email, address), 409, "invalid_request_error", { code: "email_taken" });
    expect((await registerFrom(newEmail("reg"), address)).status).toBe(201);
    expectTooMany(await registerFrom(newEmail("reg"), address), "too_many_registrations");
    expectTooMany(await registerFrom(email, address), "too_many_registrations");
    expect((await registerFrom(newEmail("reg"), newAddress())).status).toBe(201);
  });
});

describe("scrypt parameters", () => {
  const storedHash = async (email: string) =>
    (
      await app.db.pool.query<{ password_hash: string }>(
        "SELECT c.password_hash FROM account_credentials c JOIN rm_accounts a USING (account_id) WHERE a.email = $1",
        [email],
      )
    ).rows[0]!.password_hash;

  it("hashes new passwords with N=2^17, r=8, p=1", async () => {
    const email = await registerAt(newAddress());
    expect(await storedHash(email)).toMatch(/^scrypt\$131072\$8\$1\$/);
  });

  it("still accepts an N=2^15 hash, and upgrades it on the next successful login (a wrong password changes nothing)", async () => {
    const email = await registerAt(newAddress());
    const old = await passwordHasher.hash(PASSWORD, { N: 2 ** 15, r: 8, p: 1 });
    await app.db.pool.query("UPDATE account_credentials c SET password_hash = $1 FROM rm_accounts a WHERE a.account_id = c.account_id AND a.email = $2", [
      old,
      email,
    ]);
    expect((await login(email, "wrong password!", newAddress())).status).toBe(401);
    expect(await storedHash(email)).toBe(old);
    expect((await login(email, PASSWORD, newAddress())).status).toBe(200);
    const upgraded = await storedHash(email);
    expect(upgraded).toMatch(/^scrypt\$131072\$8\$1\$/);
    expect(await passwordHasher.verify(PASSWORD, upgraded)).toBe(true);
    expect((await login(email, PASSWORD, newAddress())).status).toBe(200);
    expect(await storedHash(email)).toBe(upgraded);
  });
});
