import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/testApp.ts";
import { accountEvents, expectApiError, newEmail, PASSWORD, register, totalEvents } from "./accountSteps.ts";

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app.close();
});

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe("POST /api/v1/accounts/register", () => {
  it("creates the account, appends AccountRegistered with its metadata and stores only a scrypt hash", async () => {
    const email = newEmail("ada");
    const res = await app.request("POST", "/api/v1/accounts/register", { body: { email: `  ${email.toUpperCase()} `, password: PASSWORD } });
    expect(res.status, res.text).toBe(201);
    expect(res.body).toEqual({ id: expect.stringMatching(UUID), email, created_at: expect.any(String) });
    expect(new Date(res.body.created_at).toISOString()).toBe(res.body.created_at);

    const events = await accountEvents(app, res.body.id);
    expect(events).toHaveLength(1);
    expect(events[0]!.event_type).toBe("AccountRegistered");
    expect(events[0]!.data).toEqual({ accountId: res.body.id, email, registeredAt: res.body.created_at });
    expect(events[0]!.metadata).toEqual({ correlationId: res.headers.get("x-request-id"), actor: `account:${res.body.id}` });
    expect(JSON.stringify(events[0])).not.toContain(PASSWORD);

    const credentials = await app.db.pool.query<{ password_hash: string }>("SELECT password_hash FROM account_credentials WHERE account_id = $1", [
      res.body.id,
    ]);
    expect(credentials.rows).toHaveLength(1);
    expect(credentials.rows[0]!.password_hash).toMatch(/^scrypt\$\d+\$\d+\$\d+\$[\w-]+\$[\w-]+$/);
    expect(credentials.rows[0]!.password_hash).not.toContain(PASSWORD);
  });

  it("answers 409 email_taken for a taken email, whatever its case, and appends nothing", async () => {
    const email = newEmail("taken");
    await register(app, email);
    const before = await totalEvents(app);
    for (const candidate of [email, email.toUpperCase(), ` ${email.replace("taken", "TAKEN")}`]) {
      const res = await app.request("POST", "/api/v1/accounts/register", { body: { email: candidate, password: "another password!" } });
      expectApiError(res, 409, "invalid_request_error", { code: "email_taken", param: "email" });
      // Final: the SDKs retry a 409 unless told not to.
      expect(res.headers.get("x-should-retry")).toBe("false");
    }
    expect(await totalEvents(app)).toBe(before);
    const accounts = await app.db.pool.query("SELECT 1 FROM rm_accounts WHERE email = $1", [email]);
    expect(accounts.rowCount).toBe(1);
  });

  it("lets exactly one of 5 concurrent registrations of one email win, and leaves no trace of the others", async () => {
    const email = newEmail("race");
    const before = await totalEvents(app);
    const results = await Promise.all(
      [email, email.toUpperCase(), email, email, email.toUpperCase()].map((candidate, i) =>
        app.request("POST", "/api/v1/accounts/register", { body: { email: candidate, password: `${PASSWORD} ${i}` } }),
      ),
    );
    const statuses = results.map((r) => r.status).sort();
    expect(statuses).toEqual([201, 409, 409, 409, 409]);
    for (const loser of results.filter((r) => r.status === 409)) expect(loser.body.error.code).toBe("email_taken");

    expect(await totalEvents(app)).toBe(before + 1);
    const registered = await app.db.pool.query("SELECT stream_id FROM es_events WHERE event_type = 'AccountRegistered' AND data->>'email' = $1", [email]);
    expect(registered.rowCount).toBe(1);
    const winner = results.find((r) => r.status === 201)!;
    expect(registered.rows[0]!.stream_id).toBe(`account-${winner.body.id}`);
    const streams = await app.db.pool.query("SELECT count(*)::int AS n FROM es_streams");
    const accounts = await app.db.pool.query("SELECT count(*)::int AS n FROM rm_accounts");
    const credentials = await app.db.pool.query("SELECT count(*)::int AS n FROM account_credentials");
    expect(streams.rows[0].n).toBe(accounts.rows[0].n);
    expect(credentials.rows[0].n).toBe(accounts.rows[0].n);
  });

  it.each([
    ["a malformed email", { email: "not-an-email", password: PASSWORD }, "email"],
    ["an email that is not a string", { email: 42, password: PASSWORD }, "email"],
    ["a missing email", { password: PASSWORD }, "email"],
    ["a password under 10 characters", { email: "short@example.ch", password: "123456789" }, "password"],
    // scrypt would hash "abcdefghij\u0000" as "abcdefghij", and every unpaired surrogate as U+FFFD.
    ["a password with a NUL character", { email: "nul@example.ch", password: "abcdefghij\u0000" }, "password"],
    ["a password with unpaired surrogates", { email: "surrogate@example.ch", password: "\ud800".repeat(10) }, "password"],
    ["a missing password", { email: "nopass@example.ch" }, "password"],
    ["an unknown field", { email: "extra@example.ch", password: PASSWORD, admin: true }, "admin"],
  ])("answers 400 naming the parameter for %s, and appends nothing", async (_label, body, param) => {
    const before = await totalEvents(app);
    const res = await app.request("POST", "/api/v1/accounts/register", { body });
    expectApiError(res, 400, "invalid_request_error", { param });
    expect(res.text).not.toContain(PASSWORD);
    expect(await totalEvents(app)).toBe(before);
  });

  it("answers 400 invalid_json for a malformed JSON body, and 400 for a body that is not an object", async () => {
    const malformed = await app.request("POST", "/api/v1/accounts/register", { body: '{"email": "a@b.ch", "password": ', headers: {} });
    expectApiError(malformed, 400, "invalid_request_error", { code: "invalid_json" });
    const array = await app.request("POST", "/api/v1/accounts/register", { body: [] });
    expectApiError(array, 400, "invalid_request_error");
    const none = await app.request("POST", "/api/v1/accounts/register");
    expectApiError(none, 400, "invalid_request_error");
  });

  it("says which Content-Type a JSON body needs when it came as another (it said the body was not a JSON object)", async () => {
    const body = JSON.stringify({ email: newEmail("typed"), password: PASSWORD });
    const plain = await app.request("POST", "/api/v1/accounts/register", { body, headers: { "content-type": "text/plain" } });
    expectApiError(plain, 400, "invalid_request_error", { code: "invalid_json" });
    expect(plain.body.error.message).toBe("The request body must be sent with Content-Type: application/json (it was sent as 'text/plain').");
    const form = await app.request("POST", "/api/v1/accounts/register", { body, headers: { "content-type": "application/x-www-form-urlencoded" } });
    expect(form.body.error.message).toContain("it was sent as 'application/x-www-form-urlencoded'");
    // A byte order mark before the JSON is ignored, as in a batch file's lines (it was invalid_json).
    const bom = await app.request("POST", "/api/v1/accounts/register", { body: `\ufeff${JSON.stringify({ email: newEmail("bom"), password: PASSWORD })}` });
    expect(bom.status, bom.text).toBe(201);
  });

  it("returns a request id on every response, errors included, and keeps a well-formed incoming one", async () => {
    const failed = await app.request("POST", "/api/v1/accounts/register", { body: { email: "x" } });
    expect(failed.headers.get("x-request-id")).toMatch(UUID);
    const email = newEmail("traced");
    const traced = await app.request("POST", "/api/v1/accounts/register", {
      body: { email, password: PASSWORD },
      headers: { "x-request-id": "lb-req-0001-abcdef" },
    });
    expect(traced.headers.get("x-request-id")).toBe("lb-req-0001-abcdef");
    expect((await accountEvents(app, traced.body.id))[0]!.metadata.correlationId).toBe("lb-req-0001-abcdef");
    const junk = await app.request("POST", "/api/v1/accounts/register", { body: { email: "x" }, headers: { "x-request-id": "has spaces <and> junk" } });
    expect(junk.headers.get("x-request-id")).toMatch(UUID);
    // Secret-shaped ids (a key or session token a client sent by mistake) are never kept: they would be logged, traced and stored.
    for (const secret of ["sk-AbCdEf0123456789AbCdEf0123456789AbCdEf0123456789", "sess_AbCdEf0123456789AbCdEf0123456789"]) {
      const sent = await app.request("POST", "/api/v1/accounts/register", { body: { email: "x" }, headers: { "x-request-id": secret } });
      expect(sent.headers.get("x-request-id")).toMatch(UUID);
    }
  });
});
