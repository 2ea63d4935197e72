import { expect } from "vitest";
import type { TestApp, TestResponse } from "../support/testApp.ts";

/** The most a request may take while a dependency is down. */
export const OUTAGE_ANSWER_MS = 2000;

export type TimedResponse = TestResponse & { ms: number };

export async function timed(request: Promise<TestResponse>): Promise<TimedResponse> {
  const started = performance.now();
  const response = await request;
  return { ...response, ms: performance.now() - started };
}

/** 503 service_unavailable naming the dependency, with Retry-After, within OUTAGE_ANSWER_MS. */
export function expectDependencyUnavailable(res: TimedResponse, code: "database_unavailable" | "redis_unavailable", label: string): void {
  expect(res.ms, `${label}: answered after ${Math.round(res.ms)} ms`).toBeLessThan(OUTAGE_ANSWER_MS);
  expect(res.status, `${label}: ${res.text}`).toBe(503);
  expect(res.body.error).toMatchObject({ type: "service_unavailable", code });
  expect(Number(res.headers.get("retry-after")), label).toBeGreaterThan(0);
}

/** /readyz: 503 within OUTAGE_ANSWER_MS, naming the dependency that is down. */
export async function expectNotReady(app: TestApp, down: { postgres: "ok" | "down"; redis: "ok" | "down" }): Promise<void> {
  const res = await timed(app.request("GET", "/readyz"));
  expect(res.ms, `/readyz answered after ${Math.round(res.ms)} ms`).toBeLessThan(OUTAGE_ANSWER_MS);
  expect(res.status, res.text).toBe(503);
  expect(res.body).toEqual({ status: "unavailable", ...down });
  expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(0);
}

export async function expectReady(app: TestApp): Promise<void> {
  const res = await app.request("GET", "/readyz");
  expect(res.status, res.text).toBe(200);
  expect(res.body).toEqual({ status: "ready", postgres: "ok", redis: "ok" });
}
