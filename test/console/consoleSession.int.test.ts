import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { login, newEmail, PASSWORD, register, totalEvents } from "../accounts/accountSteps.ts";
import { startTestApp, type TestApp } from "../support/testApp.ts";

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app?.close();
});

type ConsoleLogin = { cookie: string; csrf: string; setCookie: string };

/** Logs in through the console's endpoint: the session cookie (as a Cookie header) and the CSRF token. */
async function consoleLogin(email: string): Promise<ConsoleLogin> {
  const res = await app.request("POST", "/console/session", { body: { email, password: PASSWORD } });
  expect(res.status, res.text).toBe(200);
  const setCookie = res.headers.get("set-cookie") ?? "";
  const cookie = /^(console_session=[^;]+)/.exec(setCookie)?.[1];
  expect(cookie).toBeDefined();
  return { cookie: cookie!, csrf: res.body.csrf_token, setCookie };
}

const withCookie = (login: ConsoleLogin, csrf?: string) => ({ cookie: login.cookie, ...(csrf === undefined ? {} : { "x-csrf-token": csrf }) });

async function keyCount(login: ConsoleLogin): Promise<number> {
  const list = await app.request("GET", "/api/v1/accounts/user/api-keys", { headers: withCookie(login) });
  expect(list.status, list.text).toBe(200);
  return list.body.data.length;
}

describe("console session: HttpOnly SameSite=Strict cookie with CSRF protection", () => {
  it("sets the session cookie HttpOnly, SameSite=Strict, Path=/, and answers a CSRF token, never the session token", async () => {
    const email = newEmail("cookie");
    await register(app, email);
    const login = await consoleLogin(email);
    expect(login.setCookie).toMatch(/;\s*httponly/i);
    expect(login.setCookie).toMatch(/;\s*samesite=strict/i);
    expect(login.setCookie).toMatch(/;\s*path=\/(;|$)/i);
    expect(login.setCookie).toMatch(/;\s*expires=/i);
    const sessionToken = login.cookie.split("=")[1]!;
    expect(sessionToken).toMatch(/^sess_/);
    expect(login.csrf).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(login.csrf).not.toContain(sessionToken);

    const current = await app.request("GET", "/console/session", { headers: withCookie(login) });
    expect(current.status).toBe(200);
    expect(current.body).toMatchObject({ csrf_token: login.csrf, account: { email, subscription: { status: "inactive" } } });
    expect(current.text).not.toContain(sessionToken);
    // The console's JSON answers carry the API's headers: never framed, nothing loaded, never stored.
    for (const answer of [current, await app.request("GET", "/console/session"), await app.request("GET", "/console/models", { headers: withCookie(login) })]) {
      expect(answer.headers.get("content-security-policy")).toBe("default-src 'none'; frame-ancestors 'none'");
      expect(answer.headers.get("x-frame-options")).toBe("DENY");
      expect(answer.headers.get("cache-control")).toBe("no-store");
    }
  });

  it("refuses a state-changing call made with the cookie but without (or with a wrong) CSRF token, and writes nothing", async () => {
    const email = newEmail("csrf");
    await register(app, email);
    const login = await consoleLogin(email);
    const before = await totalEvents(app);

    for (const headers of [withCookie(login), withCookie(login, "")]) {
      const refused = await app.request("POST", "/api/v1/accounts/user/api-keys/create", { headers, body: { name: "forged" } });
      expect(refused.status, refused.text).toBe(403);
      expect(refused.body.error).toMatchObject({ type: "permission_error", code: "invalid_csrf_token" });
    }
    // A token that is not this session's (another session's: a console page loaded before another login in
    // the same browser) is refused as the end of that page's session, on reads too.
    const other = await consoleLogin(email);
    for (const csrf of [`${login.csrf.slice(0, -1)}x`, "short", other.csrf]) {
      for (const [method, path] of [
        ["POST", "/api/v1/accounts/user/api-keys/create"],
        ["GET", "/api/v1/accounts/user/api-keys"],
        ["GET", "/console/session"],
      ] as const) {
        const refused = await app.request(method, path, { headers: withCookie(login, csrf), ...(method === "POST" ? { body: { name: "x" } } : {}) });
        expect(refused.status, `${method} ${path} ${refused.text}`).toBe(401);
        expect(refused.body.error).toMatchObject({ type: "authentication_error", code: "session_replaced" });
      }
    }
    expect(await totalEvents(app)).toBe(before);
    expect(await keyCount(login)).toBe(0);

    const created = await app.request("POST", "/api/v1/accounts/user/api-keys/create", { headers: withCookie(login, login.csrf), body: { name: "mine" } });
    expect(created.status, created.text).toBe(201);
    const keyId = created.body.id as string;

    const renameForged = await app.request("PATCH", `/api/v1/accounts/user/api-keys/${keyId}/update`, { headers: withCookie(login), body: { name: "x" } });
    expect(renameForged.status).toBe(403);
    const revokeForged = await app.request("POST", `/api/v1/accounts/user/api-keys/${keyId}/revoke`, { headers: withCookie(login) });
    expect(revokeForged.status).toBe(403);
    const logoutForged = await app.request("DELETE", "/console/session", { headers: withCookie(login) });
    expect(logoutForged.status).toBe(403);

    const key = await app.request("GET", `/api/v1/accounts/user/api-keys/${keyId}`, { headers: withCookie(login) });
    expect(key.body).toMatchObject({ name: "mine", status: "active" });
    expect((await app.request("GET", "/console/session", { headers: withCookie(login) })).status).toBe(200);
  });

  it("keeps the Bearer session header working for scripts, with no CSRF token needed", async () => {
    const email = newEmail("bearer");
    await register(app, email);
    const token = await login(app, email);
    const created = await app.request("POST", "/api/v1/accounts/user/api-keys/create", { token, body: { name: "script" } });
    expect(created.status, created.text).toBe(201);
    const renamed = await app.request("PATCH", `/api/v1/accounts/user/api-keys/${created.body.id}/update`, { token, body: { name: "script 2" } });
    expect(renamed.body.name).toBe("script 2");
    // The Bearer header wins over a cookie: a forged request cannot ride on the header, and a script's call
    // is not refused for a stale console cookie.
    const withStaleCookie = await app.request("GET", "/api/v1/accounts/user", { token, headers: { cookie: "console_session=sess_stale" } });
    expect(withStaleCookie.status).toBe(200);
    expect((await app.request("GET", "/console/session", { token })).body.account.email).toBe(email);
  });

  it("logs out: revokes the session and clears the cookie; the old cookie is refused", async () => {
    const email = newEmail("logout");
    await register(app, email);
    const login = await consoleLogin(email);
    const out = await app.request("DELETE", "/console/session", { headers: withCookie(login, login.csrf) });
    expect(out.status).toBe(204);
    expect(out.headers.get("set-cookie")).toMatch(/^console_session=;.*expires=Thu, 01 Jan 1970/i);
    const after = await app.request("GET", "/api/v1/accounts/user/api-keys", { headers: withCookie(login) });
    expect(after.status).toBe(401);
    expect(after.body.error.code).toBe("invalid_session");
  });

  it("clears the cookie too when the account API's logout is called with it (the session revoked, no stale cookie left)", async () => {
    const email = newEmail("apilogout");
    await register(app, email);
    const login = await consoleLogin(email);
    const out = await app.request("POST", "/api/v1/accounts/logout", { headers: withCookie(login, login.csrf) });
    expect(out.status).toBe(204);
    expect(out.headers.get("set-cookie")).toMatch(/^console_session=;.*expires=Thu, 01 Jan 1970/i);
    // A Bearer logout sets no cookie (a script's session is not the browser's).
    const bearer = (await app.request("POST", "/api/v1/accounts/login", { body: { email, password: PASSWORD } })).body.session_token as string;
    const viaBearer = await app.request("POST", "/api/v1/accounts/logout", { token: bearer });
    expect(viaBearer.status).toBe(204);
    expect(viaBearer.headers.get("set-cookie")).toBeNull();
  });

  it("over HTTPS behind a trusted proxy names the cookie __Host-, Secure, no Domain; there a plain-named cookie (planted by a sibling site) is no session", async () => {
    const proxied = await startTestApp({ shareWith: app, env: { TRUST_PROXY_HOPS: "1" } });
    try {
      const https = { "x-forwarded-proto": "https", "x-forwarded-for": "203.0.113.7" };
      const email = newEmail("host");
      await register(app, email);
      const res = await proxied.request("POST", "/console/session", { body: { email, password: PASSWORD }, headers: https });
      expect(res.status, res.text).toBe(200);
      const setCookie = res.headers.get("set-cookie") ?? "";
      expect(setCookie).toMatch(/^__Host-console_session=sess_/);
      expect(setCookie).toMatch(/;\s*secure/i);
      expect(setCookie).toMatch(/;\s*path=\/(;|$)/i);
      expect(setCookie).not.toMatch(/domain=/i);
      const token = /^__Host-console_session=([^;]+)/.exec(setCookie)![1]!;
      const hostCookie = { ...https, cookie: `__Host-console_session=${token}` };
      expect((await proxied.request("GET", "/console/session", { headers: hostCookie })).body.account.email).toBe(email);
      // The same token under the plain name is not read over HTTPS; under the __Host- name not over plain HTTP.
      const planted = await proxied.request("GET", "/console/session", { headers: { ...https, cookie: `console_session=${token}` } });
      expect(planted.status).toBe(401);
      expect((await proxied.request("GET", "/console/session", { headers: { cookie: `__Host-console_session=${token}` } })).status).toBe(401);
      const out = await proxied.request("DELETE", "/console/session", { headers: { ...hostCookie, "x-csrf-token": res.body.csrf_token } });
      expect(out.status).toBe(204);
      expect(out.headers.get("set-cookie")).toMatch(/^__Host-console_session=;.*expires=Thu, 01 Jan 1970.*secure/i);
      expect((await proxied.request("GET", "/console/session", { headers: hostCookie })).status).toBe(401);
    } finally {
      await proxied.close();
    }
  });

  it("answers wrong credentials with 401 and no cookie; a malformed cookie is no session", async () => {
    const email = newEmail("wrong");
    await register(app, email);
    const res = await app.request("POST", "/console/session", { body: { email, password: "not the password" } });
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe("invalid_credentials");
    expect(res.headers.get("set-cookie")).toBeNull();
    for (const cookie of [
      "console_session=",
      "console_session=sess_%00x",
      "console_session=sess_%ED%A0%80",
      `console_session=sess_${"a".repeat(5000)}`,
      "console_session=notatoken",
    ]) {
      const anonymous = await app.request("GET", "/console/session", { headers: { cookie } });
      expect(anonymous.status, cookie).toBe(401);
      expect(anonymous.body.error.code).toBe("missing_session");
    }
  });
});

describe("console pages and assets", () => {
  it("serves the page at / and the console paths with a self-only Content-Security-Policy", async () => {
    for (const path of ["/", "/login", "/signup", "/account", "/usage", "/models", "/playground"]) {
      const res = await app.request("GET", path);
      expect(res.status, path).toBe(200);
      expect(res.headers.get("content-type")).toBe("text/html; charset=utf-8");
      expect(res.text).toContain('<script type="module" src="/console/app/main.js">');
      const csp = res.headers.get("content-security-policy") ?? "";
      expect(csp).toContain("default-src 'none'");
      expect(csp).toMatch(/script-src 'self' 'sha256-[A-Za-z0-9+/=]+'(;|$)/);
      expect(csp).toContain("connect-src 'self'");
      expect(csp).not.toMatch(/https?:|unsafe/);
      expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    }
  });

  it("serves the app's modules and the vendored libraries with their content types, and nothing else", async () => {
    const expected: Record<string, string> = {
      "/console/app/main.js": "text/javascript; charset=utf-8",
      "/console/app/console.css": "text/css; charset=utf-8",
      "/console/app/icon.svg": "image/svg+xml",
      "/console/vendor/preact.js": "text/javascript; charset=utf-8",
      "/console/vendor/preact-hooks.js": "text/javascript; charset=utf-8",
      "/console/vendor/htm.js": "text/javascript; charset=utf-8",
      "/console/vendor/uplot.js": "text/javascript; charset=utf-8",
      "/console/vendor/uplot.css": "text/css; charset=utf-8",
    };
    for (const [path, type] of Object.entries(expected)) {
      const res = await app.request("GET", path);
      expect(res.status, path).toBe(200);
      expect(res.headers.get("content-type"), path).toBe(type);
      const etag = res.headers.get("etag")!;
      expect((await app.request("GET", path, { headers: { "if-none-match": etag } })).status).toBe(304);
    }
    for (const path of [
      "/console/app/index.html",
      "/console/app/dailySeries.unit.test.ts",
      "/console/app/nope.js",
      "/console/app/..%2F..%2Fconsole.ts",
      "/console/vendor/..%2F..%2F..%2Fpackage.json",
      "/console/app/",
    ]) {
      const res = await app.request("GET", path);
      expect(res.status, path).toBe(404);
      expect(res.body.error.code).toBe("unknown_url");
    }
  });
});
