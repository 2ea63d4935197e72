import { expect } from "vitest";
import type { TestApp, TestResponse } from "../support/testApp.ts";

export const KEYS_PATH = "/api/v1/accounts/user/api-keys/";

export type CreatedKey = { id: string; name: string; key: string; masked_key: string; status: string; created_at: string };

export async function createKey(app: TestApp, sessionToken: string, name = "my key"): Promise<CreatedKey> {
  const res = await app.request("POST", `${KEYS_PATH}create/`, { body: { name }, token: sessionToken });
  expect(res.status, res.text).toBe(201);
  return res.body as CreatedKey;
}

export function expectError(res: TestResponse, status: number, type: string, fields: { param?: string | null; code?: string | null } = {}): void {
  expect(res.status, res.text).toBe(status);
  expect(res.body?.error?.type, res.text).toBe(type);
  expect(typeof res.body.error.message).toBe("string");
  if ("param" in fields) expect(res.body.error.param, res.text).toBe(fields.param);
  if ("code" in fields) expect(res.body.error.code, res.text).toBe(fields.code);
}

export type StoredEvent = { event_type: string; data: any; metadata: any };

export async function accountStreamEvents(app: TestApp, accountId: string): Promise<StoredEvent[]> {
  const rows = await app.db.pool.query<StoredEvent>("SELECT event_type, data, metadata FROM es_events WHERE stream_id = $1 ORDER BY stream_version", [
    `account-${accountId}`,
  ]);
  return rows.rows;
}
