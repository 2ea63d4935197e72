import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createKey, KEYS_PATH } from "../keys/keySteps.ts";
import { createTestAccount } from "../support/testAccounts.ts";
import { startTestApp, type TestApp } from "../support/testApp.ts";

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app.close();
});

async function lastUsedAt(target: TestApp, sessionToken: string, keyId: string): Promise<string | null> {
  const res = await target.request("GET", `${KEYS_PATH}${keyId}/`, { token: sessionToken });
  expect(res.status, res.text).toBe(200);
  return res.body.last_used_at;
}

describe("last_used_at", () => {
  it("appears in the list after a request, once the periodic flush has run", async () => {
    const account = await createTestAccount(app.db.pool);
    const key = await createKey(app, account.sessionToken);
    const before = Date.now();
    expect((await app.request("GET", "/v1/models", { token: key.key })).status).toBe(200);
    let seen: string | null = null;
    for (let attempt = 0; attempt < 100 && seen === null; attempt++) {
      await new Promise((r) => setTimeout(r, 50));
      seen = await lastUsedAt(app, account.sessionToken, key.id);
    }
    expect(seen).not.toBeNull();
    expect(new Date(seen!).getTime()).toBeGreaterThanOrEqual(before - 1000);
    const list = await app.request("GET", KEYS_PATH, { token: account.sessionToken });
    expect(list.body.data[0].last_used_at).toBe(seen);
  });

  it("writes nothing per request: uses are batched into one upsert per flush", async () => {
    const batched = await startTestApp({ keyAuth: { lastUsedFlushIntervalMs: 0 } });
    try {
      const account = await createTestAccount(batched.db.pool);
      const k1 = await createKey(batched, account.sessionToken, "one");
      const k2 = await createKey(batched, account.sessionToken, "two");
      for (let i = 0; i < 10; i++) {
        expect((await batched.request("GET", "/v1/models", { token: k1.key })).status).toBe(200);
        expect((await batched.request("GET", "/v1/models", { token: k2.key })).status).toBe(200);
      }
      const recorder = batched.deps.keyAuth.lastUsed;
      const rowsBefore = await batched.db.pool.query("SELECT count(*)::int AS n FROM key_last_used");
      expect(rowsBefore.rows[0].n).toBe(0);
      expect(recorder.writeCount).toBe(0);
      expect(recorder.pendingCount).toBe(2);
      expect(await lastUsedAt(batched, account.sessionToken, k1.id)).toBeNull();

      expect(await recorder.flush()).toBe(2);
      expect(recorder.writeCount).toBe(1);
      expect(recorder.pendingCount).toBe(0);
      const rows = await batched.db.pool.query("SELECT key_id FROM key_last_used ORDER BY key_id");
      expect(rows.rows.map((r) => r.key_id).sort()).toEqual([k1.id, k2.id].sort());
      expect(await lastUsedAt(batched, account.sessionToken, k1.id)).not.toBeNull();
      expect(await recorder.flush()).toBe(0);
      expect(recorder.writeCount).toBe(1);
    } finally {
      await batched.close();
    }
  });

  it("keeps the latest time when an older batch is written after a newer one (GREATEST)", async () => {
    const account = await createTestAccount(app.db.pool);
    const key = await createKey(app, account.sessionToken);
    const recorder = app.deps.keyAuth.lastUsed;
    recorder.record(key.id, new Date("2030-01-02T00:00:00.000Z"));
    await recorder.flush();
    recorder.record(key.id, new Date("2030-01-01T00:00:00.000Z"));
    await recorder.flush();
    expect(await lastUsedAt(app, account.sessionToken, key.id)).toBe("2030-01-02T00:00:00.000Z");
  });

  it("flushes what is pending when the app stops", async () => {
    const stopping = await startTestApp({ keyAuth: { lastUsedFlushIntervalMs: 0 } });
    const account = await createTestAccount(stopping.db.pool);
    const key = await createKey(stopping, account.sessionToken);
    expect((await stopping.request("GET", "/v1/models", { token: key.key })).status).toBe(200);
    await stopping.deps.keyAuth.stop();
    const rows = await stopping.db.pool.query("SELECT key_id FROM key_last_used");
    await stopping.close();
    expect(rows.rows.map((r) => r.key_id)).toEqual([key.id]);
  });
});
