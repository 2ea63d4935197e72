import { expect } from "vitest";
import type { TestApp } from "../support/testApp.ts";

export const PASSWORD = "correct horse battery staple";

let counter = 0;
/** A fresh email per call (unique within a test file; every file has its own database). */
export function newEmail(prefix = "user"): string {
  counter += 1;
  return `${prefix}-${counter}-${Date.now().toString(36)}@example.ch`;
}

export async function register(app: TestApp, email: string, password = PASSWORD): Promise<{ id: string; email: string; created_at: string }> {
  const res = await app.request("POST", "/api/v1/accounts/register", { body: { email, password } });
  expect(res.status, res.text).toBe(201);
  return res.body;
}

export async function login(app: TestApp, email: string, password = PASSWORD): Promise<string> {
  const res = await app.request("POST", "/api/v1/accounts/login", { body: { email, password } });
  expect(res.status, res.text).toBe(200);
  return res.body.session_token as string;
}

export type StoredEvent = { stream_version: number; event_type: string; data: any; metadata: any };

/** The events of one account stream, in order. */
export async function accountEvents(app: TestApp, accountId: string): Promise<StoredEvent[]> {
  const rows = await app.db.pool.query<StoredEvent>(
    "SELECT stream_version::int AS stream_version, event_type, data, metadata FROM es_events WHERE stream_id = $1 ORDER BY stream_version",
    [`account-${accountId}`],
  );
  return rows.rows;
}

export async function totalEvents(app: TestApp): Promise<number> {
  const rows = await app.db.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM es_events");
  return rows.rows[0]!.n;
}

/** Every failure renders the OpenAI error shape {error: {message, type, param, code}}. */
export function expectApiError(
  res: { status: number; body: any; text: string },
  status: number,
  type: string,
  fields: { code?: string | null; param?: string | null } = {},
): void {
  expect(res.status, res.text).toBe(status);
  expect(Object.keys(res.body).sort()).toEqual(["error"]);
  expect(Object.keys(res.body.error).sort()).toEqual(["code", "message", "param", "type"]);
  expect(res.body.error.type).toBe(type);
  expect(typeof res.body.error.message).toBe("string");
  if (fields.code !== undefined) expect(res.body.error.code).toBe(fields.code);
  if (fields.param !== undefined) expect(res.body.error.param).toBe(fields.param);
}
