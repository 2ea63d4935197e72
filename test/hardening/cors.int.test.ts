import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestPlatform, TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";
import { startTestApp, type TestApp } from "../support/testApp.ts";
import { createTestAccount } from "../support/testAccounts.ts";

const ORIGIN = "https://console.example.com";

/** A browser's preflight: OPTIONS with the method and headers the real request will use. */
function preflight(baseUrl: string, path: string, method: string, headers: string, origin = ORIGIN) {
  return fetch(baseUrl + path, {
    method: "OPTIONS",
    headers: { origin, "access-control-request-method": method, "access-control-request-headers": headers },
  });
}

describe("CORS and security headers with the default configuration", () => {
  let platform: TestPlatform;
  let key: string;
  let sessionToken: string;
  beforeAll(async () => {
    platform = await startTestPlatform();
    const created = await platform.createKey();
    key = created.key;
    sessionToken = created.account.sessionToken;
  });
  afterAll(async () => {
    await platform?.close();
  });

  it("answers a /v1 preflight before authentication, for any origin, without credentials", async () => {
    const requested = "authorization, content-type, x-stainless-os, x-stainless-retry-count";
    const res = await preflight(platform.baseUrl, "/v1/chat/completions", "POST", requested);
    expect(res.status).toBe(204);
    expect(res.headers.get("access-control-allow-origin")).toBe("*");
    expect(res.headers.get("access-control-allow-methods")).toContain("POST");
    expect(res.headers.get("access-control-allow-headers")).toBe(requested);
    expect(res.headers.get("access-control-allow-credentials")).toBeNull();
    expect(Number(res.headers.get("access-control-max-age"))).toBeGreaterThan(0);
  });

  it("routes paths as written only: /V1 and /API are not the API's (404), so no answer skips the headers of /v1 and /api", async () => {
    for (const path of ["/V1/models", "/v1/MODELS", "/API/v1/accounts/user", "/V1/chat/completions"]) {
      const res = await fetch(platform.baseUrl + path, { headers: { authorization: `Bearer ${path.startsWith("/API") ? sessionToken : key}` } });
      expect(res.status, path).toBe(404);
      expect(((await res.json()) as { error: { type: string } }).error.type, path).toBe("invalid_request_error");
    }
    const models = await fetch(`${platform.baseUrl}/v1/models`, { headers: { authorization: `Bearer ${key}` } });
    expect(models.status).toBe(200);
  });

  it("lets a browser-origin call to /v1 through, with readable headers and no-store", async () => {
    const res = await fetch(`${platform.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { origin: ORIGIN, authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: TINY_CHAT, messages: [{ role: "user", content: "Hi" }], max_tokens: 2 }),
    });
    expect(res.status, await res.clone().text()).toBe(200);
    expect(res.headers.get("access-control-allow-origin")).toBe("*");
    expect(res.headers.get("access-control-expose-headers")).toContain("x-request-id");
    // A browser script reads how a completion ended (x-completion-status on its GET), and the trace id.
    for (const name of ["x-completion-id", "x-completion-status", "x-trace-id"]) expect(res.headers.get("access-control-expose-headers")).toContain(name);
    // The rate-limit headers it carries are readable too (OpenAI's names).
    const exposed = res.headers.get("access-control-expose-headers")!.split(",");
    for (const name of ["limit", "remaining", "reset"].flatMap((n) => [`x-ratelimit-${n}-requests`, `x-ratelimit-${n}-tokens`])) {
      expect(res.headers.get(name), name).not.toBeNull();
      expect(exposed).toContain(name);
    }
    expect(res.headers.get("cache-control")).toBe("no-store");
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    expect(((await res.json()) as { object: string }).object).toBe("chat.completion");

    const models = await fetch(`${platform.baseUrl}/v1/models`, { headers: { origin: ORIGIN, authorization: `Bearer ${key}` } });
    expect(models.status).toBe(200);
    expect(models.headers.get("access-control-allow-origin")).toBe("*");
  });

  it("keeps the CORS headers on errors, so a browser script can read them", async () => {
    const res = await fetch(`${platform.baseUrl}/v1/models`, { headers: { origin: ORIGIN, authorization: "Bearer sk-wrong" } });
    expect(res.status).toBe(403);
    expect(res.headers.get("access-control-allow-origin")).toBe("*");
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    expect(((await res.json()) as { error: { type: string } }).error.type).toBe("Forbidden");
  });

  it("gives /api no CORS by default: the preflight carries no allow-origin and never reaches the session check", async () => {
    const res = await preflight(platform.baseUrl, "/api/v1/accounts/user/api-keys/create", "POST", "authorization, content-type");
    expect(res.status).toBe(204);
    expect(res.headers.get("access-control-allow-origin")).toBeNull();
    const call = await fetch(`${platform.baseUrl}/api/v1/accounts/user/api-keys`, { headers: { origin: ORIGIN, authorization: `Bearer ${sessionToken}` } });
    expect(call.status).toBe(200);
    expect(call.headers.get("access-control-allow-origin")).toBeNull();
    expect(call.headers.get("cache-control")).toBe("no-store");
    expect(call.headers.get("x-frame-options")).toBe("DENY");
  });
});

describe("CORS allow-lists from the configuration", () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp({ env: { CORS_V1_ORIGINS: "none", CORS_API_ORIGINS: `${ORIGIN}, https://other.example.com:8443` } });
  });
  afterAll(async () => {
    await app?.close();
  });

  it("allows exactly the listed origins on /api, echoing the origin, and none on /v1 when told so", async () => {
    const allowed = await preflight(app.baseUrl, "/api/v1/accounts/login", "POST", "content-type");
    expect(allowed.status).toBe(204);
    expect(allowed.headers.get("access-control-allow-origin")).toBe(ORIGIN);
    expect(allowed.headers.get("vary")).toMatch(/origin/i);
    const other = await preflight(app.baseUrl, "/api/v1/accounts/login", "POST", "content-type", "https://evil.example.com");
    expect(other.headers.get("access-control-allow-origin")).toBeNull();

    const account = await createTestAccount(app.deps.pool);
    const call = await fetch(`${app.baseUrl}/api/v1/accounts/user`, { headers: { origin: ORIGIN, authorization: `Bearer ${account.sessionToken}` } });
    expect(call.status).toBe(200);
    expect(call.headers.get("access-control-allow-origin")).toBe(ORIGIN);

    const v1 = await preflight(app.baseUrl, "/v1/models", "GET", "authorization");
    expect(v1.headers.get("access-control-allow-origin")).toBeNull();
  });
});
