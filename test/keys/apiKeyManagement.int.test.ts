import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestAccount } from "../support/testAccounts.ts";
import { startTestApp, type TestApp } from "../support/testApp.ts";
import { accountStreamEvents, createKey, expectError, KEYS_PATH } from "./keySteps.ts";

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app.close();
});

const KEY_FIELDS = ["created_at", "id", "last_used_at", "masked_key", "name", "revoked_at", "status", "usage"];

describe("API key management", () => {
  it("shows the full key only in the create response and stores only its SHA-256", async () => {
    const account = await createTestAccount(app.db.pool);
    const res = await app.request("POST", `${KEYS_PATH}create/`, { body: { name: "  production  " }, token: account.sessionToken });
    expect(res.status, res.text).toBe(201);
    const created = res.body;
    expect(created).toMatchObject({ id: expect.any(String), name: "production", status: "active", last_used_at: null, revoked_at: null });
    expect(created.key).toMatch(/^sk-[0-9A-Za-z]{49}$/);
    expect(created.masked_key).toBe(`sk-****************${created.key.slice(-4)}`);
    expect(new Date(created.created_at).toISOString()).toBe(created.created_at);
    expect(res.headers.get("cache-control")).toBe("no-store");
    const secret: string = created.key;

    const list = await app.request("GET", KEYS_PATH, { token: account.sessionToken });
    const view = await app.request("GET", `${KEYS_PATH}${created.id}/`, { token: account.sessionToken });
    expect(list.status).toBe(200);
    expect(view.status).toBe(200);
    expect(list.body.data[0].masked_key).toBe(created.masked_key);
    expect(view.body.masked_key).toBe(created.masked_key);
    for (const text of [list.text, view.text]) {
      expect(text).not.toContain(secret);
      expect(text).not.toContain(secret.slice(3, 20));
    }

    const hash = createHash("sha256").update(secret).digest("hex");
    const events = await app.db.pool.query<{ data: string; metadata: string }>("SELECT data::text AS data, metadata::text AS metadata FROM es_events");
    for (const row of events.rows) {
      expect(row.data).not.toContain(secret.slice(3));
      expect(row.metadata).not.toContain(secret.slice(3));
    }
    const keyRows = await app.db.pool.query<{ row: string; key_hash: string }>("SELECT row_to_json(k)::text AS row, key_hash FROM rm_keys k");
    expect(keyRows.rows.map((r) => r.key_hash)).toEqual([hash]);
    expect(keyRows.rows[0]!.row).not.toContain(secret.slice(3));

    const stream = await accountStreamEvents(app, account.accountId);
    const keyCreated = stream.find((e) => e.event_type === "KeyCreated")!;
    expect(keyCreated.data).toMatchObject({ keyId: created.id, name: "production", keyHash: hash, last4: secret.slice(-4) });
    expect(keyCreated.metadata).toEqual({ actor: `account:${account.accountId}`, correlationId: res.headers.get("x-request-id") });
  });

  it("lists every key of the account, active and revoked, with zero usage over 30 days", async () => {
    const account = await createTestAccount(app.db.pool);
    const first = await createKey(app, account.sessionToken, "first");
    const second = await createKey(app, account.sessionToken, "second");
    const revoked = await app.request("POST", `${KEYS_PATH}${first.id}/revoke/`, { token: account.sessionToken });
    expect(revoked.status, revoked.text).toBe(200);

    const dayBefore = new Date().toISOString().slice(0, 10);
    const res = await app.request("GET", KEYS_PATH, { token: account.sessionToken });
    const dayAfter = new Date().toISOString().slice(0, 10);
    expect(res.status, res.text).toBe(200);
    expect(res.body.object).toBe("list");
    expect(res.body.data.map((k: { id: string }) => k.id)).toEqual([first.id, second.id]);
    for (const key of res.body.data) {
      expect(Object.keys(key).sort()).toEqual(KEY_FIELDS);
      expect(key.usage.total_requests).toBe(0);
      expect(key.usage.total_cost_chf).toBe(0);
      expect(key.usage.last_30_days).toHaveLength(30);
      expect([dayBefore, dayAfter]).toContain(key.usage.last_30_days.at(-1).date);
      for (const day of key.usage.last_30_days) expect(day).toEqual({ date: expect.stringMatching(/^\d{4}-\d{2}-\d{2}$/), requests: 0, cost_chf: 0 });
    }
    const [a, b] = res.body.data;
    expect(a).toMatchObject({ name: "first", status: "revoked", revoked_at: expect.any(String) });
    expect(b).toMatchObject({ name: "second", status: "active", revoked_at: null, last_used_at: null });

    const view = await app.request("GET", `${KEYS_PATH}${second.id}`, { token: account.sessionToken });
    expect(view.status).toBe(200);
    expect(view.body).toEqual(b);
  });

  it("answers with and without the trailing slash", async () => {
    const account = await createTestAccount(app.db.pool);
    const res = await app.request("POST", `${KEYS_PATH}create`, { body: { name: "no slash" }, token: account.sessionToken });
    expect(res.status, res.text).toBe(201);
    const id = res.body.id;
    expect((await app.request("GET", KEYS_PATH.slice(0, -1), { token: account.sessionToken })).status).toBe(200);
    expect((await app.request("GET", `${KEYS_PATH}${id}`, { token: account.sessionToken })).status).toBe(200);
    expect((await app.request("PATCH", `${KEYS_PATH}${id}/update`, { body: { name: "x" }, token: account.sessionToken })).status).toBe(200);
    expect((await app.request("POST", `${KEYS_PATH}${id}/revoke`, { token: account.sessionToken })).status).toBe(200);
  });

  it("renames a key (trimmed) with one KeyRenamed event", async () => {
    const account = await createTestAccount(app.db.pool);
    const key = await createKey(app, account.sessionToken, "old name");
    const res = await app.request("PATCH", `${KEYS_PATH}${key.id}/update/`, { body: { name: "  new name " }, token: account.sessionToken });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ id: key.id, name: "new name", status: "active", masked_key: key.masked_key });
    expect(Object.keys(res.body).sort()).toEqual(KEY_FIELDS);
    const view = await app.request("GET", `${KEYS_PATH}${key.id}/`, { token: account.sessionToken });
    expect(view.body.name).toBe("new name");
    const renamed = (await accountStreamEvents(app, account.accountId)).filter((e) => e.event_type === "KeyRenamed");
    expect(renamed).toHaveLength(1);
    expect(renamed[0]!.data).toMatchObject({ keyId: key.id, name: "new name" });
    expect(renamed[0]!.metadata).toMatchObject({ actor: `account:${account.accountId}`, correlationId: expect.any(String) });
  });

  it("revokes a key; revoking again answers 200 and appends nothing", async () => {
    const account = await createTestAccount(app.db.pool);
    const key = await createKey(app, account.sessionToken);
    const first = await app.request("POST", `${KEYS_PATH}${key.id}/revoke/`, { token: account.sessionToken });
    expect(first.status, first.text).toBe(200);
    expect(first.body).toMatchObject({ id: key.id, status: "revoked", revoked_at: expect.any(String) });
    const second = await app.request("POST", `${KEYS_PATH}${key.id}/revoke/`, { token: account.sessionToken });
    expect(second.status, second.text).toBe(200);
    expect(second.body).toEqual(first.body);
    const revokedEvents = (await accountStreamEvents(app, account.accountId)).filter((e) => e.event_type === "KeyRevoked");
    expect(revokedEvents).toHaveLength(1);
    expect(revokedEvents[0]!.metadata).toMatchObject({ actor: `account:${account.accountId}`, correlationId: expect.any(String) });
  });

  it("refuses bad names with 400 param name, on create and rename", async () => {
    const account = await createTestAccount(app.db.pool);
    const key = await createKey(app, account.sessionToken);
    const badBodies = [{ name: "" }, { name: "   " }, { name: "x".repeat(101) }, { name: 42 }, { name: null }, { name: ["a"] }, {}];
    for (const body of badBodies) {
      const create = await app.request("POST", `${KEYS_PATH}create/`, { body, token: account.sessionToken });
      expectError(create, 400, "invalid_request_error", { param: "name" });
      const rename = await app.request("PATCH", `${KEYS_PATH}${key.id}/update/`, { body, token: account.sessionToken });
      expectError(rename, 400, "invalid_request_error", { param: "name" });
    }
    const longest = await app.request("POST", `${KEYS_PATH}create/`, { body: { name: ` ${"y".repeat(100)} ` }, token: account.sessionToken });
    expect(longest.status, longest.text).toBe(201);
    expect(longest.body.name).toBe("y".repeat(100));
    const keys = await app.request("GET", KEYS_PATH, { token: account.sessionToken });
    expect(keys.body.data).toHaveLength(2);
  });

  it("refuses unknown body fields and non-object bodies with 400", async () => {
    const account = await createTestAccount(app.db.pool);
    const key = await createKey(app, account.sessionToken);
    const create = await app.request("POST", `${KEYS_PATH}create/`, { body: { name: "a", expires_at: 1 }, token: account.sessionToken });
    expectError(create, 400, "invalid_request_error", { param: "expires_at", code: "unknown_parameter" });
    const rename = await app.request("PATCH", `${KEYS_PATH}${key.id}/update/`, { body: { name: "a", status: "active" }, token: account.sessionToken });
    expectError(rename, 400, "invalid_request_error", { param: "status", code: "unknown_parameter" });
    const array = await app.request("POST", `${KEYS_PATH}create/`, { body: [{ name: "a" }], token: account.sessionToken });
    expectError(array, 400, "invalid_request_error");
    const broken = await app.request("POST", `${KEYS_PATH}create/`, { body: '{"name": ', token: account.sessionToken });
    expectError(broken, 400, "invalid_request_error");
    expect((await app.request("GET", KEYS_PATH, { token: account.sessionToken })).body.data).toHaveLength(1);
  });

  it("allows 5 active keys: the 6th is refused with api_key_limit_reached until one is revoked", async () => {
    const account = await createTestAccount(app.db.pool);
    const keys = [];
    for (let i = 0; i < 5; i++) keys.push(await createKey(app, account.sessionToken, `key ${i}`));
    const sixth = await app.request("POST", `${KEYS_PATH}create/`, { body: { name: "sixth" }, token: account.sessionToken });
    expectError(sixth, 400, "invalid_request_error", { code: "api_key_limit_reached" });
    await app.request("POST", `${KEYS_PATH}${keys[0]!.id}/revoke/`, { token: account.sessionToken });
    const again = await app.request("POST", `${KEYS_PATH}create/`, { body: { name: "sixth" }, token: account.sessionToken });
    expect(again.status, again.text).toBe(201);
    const list = await app.request("GET", KEYS_PATH, { token: account.sessionToken });
    expect(list.body.data).toHaveLength(6);
    expect(list.body.data.filter((k: { status: string }) => k.status === "active")).toHaveLength(5);
  });

  it("creates exactly 5 keys when 10 creates race on a fresh account", async () => {
    const account = await createTestAccount(app.db.pool);
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) => app.request("POST", `${KEYS_PATH}create/`, { body: { name: `race ${i}` }, token: account.sessionToken })),
    );
    const created = results.filter((r) => r.status === 201);
    const refused = results.filter((r) => r.status === 400);
    expect(created).toHaveLength(5);
    expect(refused).toHaveLength(5);
    for (const res of refused) expectError(res, 400, "invalid_request_error", { code: "api_key_limit_reached" });
    const rows = await app.db.pool.query("SELECT status FROM rm_keys WHERE account_id = $1", [account.accountId]);
    expect(rows.rows).toHaveLength(5);
    expect(rows.rows.every((r) => r.status === "active")).toBe(true);
    const events = (await accountStreamEvents(app, account.accountId)).filter((e) => e.event_type === "KeyCreated");
    expect(events).toHaveLength(5);
  });

  it("never shows or touches another account's key: 404 for view, rename and revoke", async () => {
    const a = await createTestAccount(app.db.pool);
    const b = await createTestAccount(app.db.pool);
    const aKey = await createKey(app, a.sessionToken, "a's key");
    const bKey = await createKey(app, b.sessionToken, "b's key");
    const unknownId = "3f2504e0-4f89-41d3-9a0c-0305e82c3301";

    const responses = {
      view: await app.request("GET", `${KEYS_PATH}${aKey.id}/`, { token: b.sessionToken }),
      rename: await app.request("PATCH", `${KEYS_PATH}${aKey.id}/update/`, { body: { name: "stolen" }, token: b.sessionToken }),
      revoke: await app.request("POST", `${KEYS_PATH}${aKey.id}/revoke/`, { token: b.sessionToken }),
    };
    const unknown = await app.request("GET", `${KEYS_PATH}${unknownId}/`, { token: b.sessionToken });
    for (const res of Object.values(responses)) {
      expectError(res, 404, "invalid_request_error", { code: "api_key_not_found" });
      // Same answer as for an id that exists nowhere.
      expect(res.body.error.message.replace(aKey.id, "ID")).toBe(unknown.body.error.message.replace(unknownId, "ID"));
    }
    const bList = await app.request("GET", KEYS_PATH, { token: b.sessionToken });
    expect(bList.body.data.map((k: { id: string }) => k.id)).toEqual([bKey.id]);
    const aView = await app.request("GET", `${KEYS_PATH}${aKey.id}/`, { token: a.sessionToken });
    expect(aView.body).toMatchObject({ name: "a's key", status: "active" });
    expect((await accountStreamEvents(app, b.accountId)).map((e) => e.event_type)).toEqual([
      "AccountRegistered",
      "SubscriptionActivated",
      "MonthlyBudgetSet",
      "KeyCreated",
    ]);
  });

  it("answers 404 for a malformed key id", async () => {
    const account = await createTestAccount(app.db.pool);
    await createKey(app, account.sessionToken);
    for (const id of ["not-a-uuid", "123", "3f2504e0-4f89-41d3-9a0c-0305e82c330", "%27%20OR%201%3D1"]) {
      expectError(await app.request("GET", `${KEYS_PATH}${id}/`, { token: account.sessionToken }), 404, "invalid_request_error");
      expectError(await app.request("PATCH", `${KEYS_PATH}${id}/update/`, { body: { name: "x" }, token: account.sessionToken }), 404, "invalid_request_error");
      expectError(await app.request("POST", `${KEYS_PATH}${id}/revoke/`, { token: account.sessionToken }), 404, "invalid_request_error");
    }
  });

  it("requires a valid session: 401 without one, with a bad one, or with an API key", async () => {
    const account = await createTestAccount(app.db.pool);
    const key = await createKey(app, account.sessionToken);
    const calls: [string, string, unknown][] = [
      ["GET", KEYS_PATH, undefined],
      ["POST", `${KEYS_PATH}create/`, { name: "x" }],
      ["GET", `${KEYS_PATH}${key.id}/`, undefined],
      ["PATCH", `${KEYS_PATH}${key.id}/update/`, { name: "x" }],
      ["POST", `${KEYS_PATH}${key.id}/revoke/`, undefined],
    ];
    for (const [method, path, body] of calls) {
      for (const token of [undefined, "sess_not-a-real-session", key.key]) {
        expectError(await app.request(method, path, { body, token }), 401, "authentication_error");
      }
    }
    const view = await app.request("GET", `${KEYS_PATH}${key.id}/`, { token: account.sessionToken });
    expect(view.body).toMatchObject({ name: "my key", status: "active" });
  });
});
