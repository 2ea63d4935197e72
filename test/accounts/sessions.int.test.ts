import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/testApp.ts";
import { expectApiError, login, newEmail, PASSWORD, register } from "./accountSteps.ts";

/** A clock the test moves: sessions expire against it. */
let now = new Date("2025-06-01T08:00:00.000Z");
const clock = { now: () => now };
const SEVEN_DAYS_MS = 7 * 24 * 3600_000;

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ clock });
});
afterAll(async () => {
  await app.close();
});

describe("POST /api/v1/accounts/login", () => {
  it("opens a session that expires after 7 days by default, and stores only the token's SHA-256", async () => {
    const email = newEmail("login");
    await register(app, email);
    const res = await app.request("POST", "/api/v1/accounts/login", { body: { email: email.toUpperCase(), password: PASSWORD } });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({ session_token: expect.stringMatching(/^sess_[\w-]{43}$/), expires_at: new Date(now.getTime() + SEVEN_DAYS_MS).toISOString() });
    expect(res.headers.get("cache-control")).toBe("no-store");

    const stored = await app.db.pool.query("SELECT token_hash FROM sessions");
    const hashes = stored.rows.map((r) => r.token_hash);
    expect(hashes).toContain(createHash("sha256").update(res.body.session_token).digest("hex"));
    expect(hashes).not.toContain(res.body.session_token);
  });

  it("gives the same 401 for a wrong password and for an unknown email", async () => {
    const email = newEmail("wrong");
    await register(app, email);
    const wrongPassword = await app.request("POST", "/api/v1/accounts/login", { body: { email, password: "not the password" } });
    const unknownEmail = await app.request("POST", "/api/v1/accounts/login", { body: { email: newEmail("ghost"), password: PASSWORD } });
    const malformedEmail = await app.request("POST", "/api/v1/accounts/login", { body: { email: "ghost", password: "x" } });
    for (const res of [wrongPassword, unknownEmail, malformedEmail]) {
      expectApiError(res, 401, "authentication_error", { code: "invalid_credentials", param: null });
    }
    expect(unknownEmail.body).toEqual(wrongPassword.body);
    expect(malformedEmail.body).toEqual(wrongPassword.body);
  });

  it("answers 400 for unknown fields and for a body without credentials", async () => {
    expectApiError(
      await app.request("POST", "/api/v1/accounts/login", { body: { email: "a@b.ch", password: "x", remember: true } }),
      400,
      "invalid_request_error",
      {
        param: "remember",
        code: "unknown_parameter",
      },
    );
    expectApiError(await app.request("POST", "/api/v1/accounts/login", { body: {} }), 400, "invalid_request_error", { param: "email" });
    expectApiError(await app.request("POST", "/api/v1/accounts/login", { body: "{not json" }), 400, "invalid_request_error", { code: "invalid_json" });
  });
});

describe("GET /api/v1/accounts/user/", () => {
  it("shows the account and its subscription, with or without the trailing slash", async () => {
    const email = newEmail("me");
    const account = await register(app, email);
    const token = await login(app, email);
    for (const path of ["/api/v1/accounts/user/", "/api/v1/accounts/user"]) {
      const res = await app.request("GET", path, { token });
      expect(res.status, res.text).toBe(200);
      // Other slices may add fields (the usage slice adds current_period); these are the account's own.
      expect(res.body).toMatchObject({ id: account.id, email, created_at: account.created_at });
      expect(res.body.subscription).toEqual({ status: "inactive", monthly_budget_chf: 0 });
    }
  });

  it("refuses a missing, malformed or unknown session token with 401", async () => {
    expectApiError(await app.request("GET", "/api/v1/accounts/user/"), 401, "authentication_error", { code: "missing_session" });
    expectApiError(await app.request("GET", "/api/v1/accounts/user/", { token: "sess_unknown" }), 401, "authentication_error", {
      code: "invalid_session",
    });
    expectApiError(await app.request("GET", "/api/v1/accounts/user/", { headers: { authorization: "Basic dXNlcjpwYXNz" } }), 401, "authentication_error");
  });
});

describe("sessions end", () => {
  it("logout answers 204 and the token stops working at once, while other sessions go on", async () => {
    const email = newEmail("logout");
    await register(app, email);
    const token = await login(app, email);
    const other = await login(app, email);
    expect(other).not.toBe(token);

    const res = await app.request("POST", "/api/v1/accounts/logout", { token });
    expect(res.status, res.text).toBe(204);
    expect(res.text).toBe("");
    expectApiError(await app.request("GET", "/api/v1/accounts/user/", { token }), 401, "authentication_error", { code: "invalid_session" });
    expectApiError(await app.request("POST", "/api/v1/accounts/logout", { token }), 401, "authentication_error");
    expect((await app.request("GET", "/api/v1/accounts/user/", { token: other })).status).toBe(200);
  });

  it("logout without a session is refused with 401", async () => {
    expectApiError(await app.request("POST", "/api/v1/accounts/logout"), 401, "authentication_error", { code: "missing_session" });
  });

  it("an expired session is refused", async () => {
    const email = newEmail("expiry");
    await register(app, email);
    const token = await login(app, email);
    const loggedInAt = now.getTime();
    // Used every 23 hours (SESSION_IDLE_HOURS is 24 by default), it lasts its 7 days.
    for (let use = 1; use <= 7; use++) {
      now = new Date(loggedInAt + use * 23 * 3600_000);
      expect((await app.request("GET", "/api/v1/accounts/user/", { token })).status).toBe(200);
      await lastSeenReaches(token, now);
    }
    now = new Date(loggedInAt + SEVEN_DAYS_MS - 1000);
    expect((await app.request("GET", "/api/v1/accounts/user/", { token })).status).toBe(200);
    now = new Date(now.getTime() + 1000);
    expectApiError(await app.request("GET", "/api/v1/accounts/user/", { token }), 401, "authentication_error", { code: "invalid_session" });
    // A new login works again.
    expect((await app.request("GET", "/api/v1/accounts/user/", { token: await login(app, email) })).status).toBe(200);
  });
});

/** Waits until the session's last use is noted as `at` (the note is written without the request waiting for it). */
async function lastSeenReaches(token: string, at: Date): Promise<void> {
  const hash = createHash("sha256").update(token).digest("hex");
  for (let i = 0; i < 100; i++) {
    const { rows } = await app.db.pool.query<{ last_seen_at: Date | null }>("SELECT last_seen_at FROM sessions WHERE token_hash = $1", [hash]);
    if (rows[0]?.last_seen_at?.getTime() === at.getTime()) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error("the session's last use was not noted");
}

describe("idle sessions", () => {
  it("ends a session unused for SESSION_IDLE_HOURS (24 by default); each use keeps it alive; noted at most once a minute", async () => {
    const email = newEmail("idle");
    await register(app, email);
    const token = await login(app, email);
    const hash = createHash("sha256").update(token).digest("hex");
    const lastSeen = async () =>
      (await app.db.pool.query<{ last_seen_at: Date | null }>("SELECT last_seen_at FROM sessions WHERE token_hash = $1", [hash])).rows[0]?.last_seen_at ?? null;
    // Used within its first minute: nothing written.
    now = new Date(now.getTime() + 30_000);
    expect((await app.request("GET", "/api/v1/accounts/user/", { token })).status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await lastSeen()).toBeNull();
    // Nearly a day later: still alive, and the use is noted.
    now = new Date(now.getTime() + 24 * 3600_000 - 60_000);
    expect((await app.request("GET", "/api/v1/accounts/user/", { token })).status).toBe(200);
    await lastSeenReaches(token, now);
    // Nearly a day after that use: alive (counted from the use, not from the login).
    const usedAt = now.getTime();
    now = new Date(usedAt + 24 * 3600_000 - 1000);
    expect((await app.request("GET", "/api/v1/accounts/user/", { token })).status).toBe(200);
    await lastSeenReaches(token, now);
    // A day and a second without use: over; the cookie's route says the same.
    now = new Date(now.getTime() + 24 * 3600_000 + 1000);
    expectApiError(await app.request("GET", "/api/v1/accounts/user/", { token }), 401, "authentication_error", { code: "invalid_session" });
    expect((await app.request("GET", "/api/v1/accounts/user/api-keys", { token })).status).toBe(401);
  });

  it("SESSION_IDLE_HOURS=0 ends sessions only at their lifetime", async () => {
    const patient = await startTestApp({ clock, shareWith: app, env: { SESSION_IDLE_HOURS: "0" } });
    try {
      const email = newEmail("noidle");
      await register(patient, email);
      const token = await login(patient, email);
      now = new Date(now.getTime() + SEVEN_DAYS_MS - 1000);
      expect((await patient.request("GET", "/api/v1/accounts/user/", { token })).status).toBe(200);
    } finally {
      await patient.close();
    }
  });
});

describe("session lifetime from the configuration", () => {
  it("uses SESSION_TTL_HOURS", async () => {
    const shortLived = await startTestApp({ clock, env: { SESSION_TTL_HOURS: "2" } });
    try {
      const email = newEmail("ttl");
      await register(shortLived, email);
      const res = await shortLived.request("POST", "/api/v1/accounts/login", { body: { email, password: PASSWORD } });
      expect(res.body.expires_at).toBe(new Date(now.getTime() + 2 * 3600_000).toISOString());
    } finally {
      await shortLived.close();
    }
  });
});
