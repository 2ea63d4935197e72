import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { silentLogger } from "../../src/observability/logger.ts";
import { placeHold } from "../../src/ledger/budget/placeHold.ts";
import { UsageRecorder } from "../../workers/completion/usageRecorder.ts";
import { allProjections } from "../../projections/allProjections.ts";
import { ProjectionRunner } from "../../projections/projectionRunner.ts";
import { createKey, expectError, KEYS_PATH } from "../keys/keySteps.ts";
import { eventuallyTrue } from "../support/eventually.ts";
import { createTestAccount, type TestAccount } from "../support/testAccounts.ts";
import { startTestApp, type TestApp } from "../support/testApp.ts";
import { usageEvent } from "./usageFixtures.ts";

const NOW = new Date("2025-04-15T12:00:00.000Z");

let app: TestApp;
let runner: ProjectionRunner;
let account: TestAccount;
let keyA: string;
let keyB: string;

beforeAll(async () => {
  app = await startTestApp({ clock: { now: () => NOW } });
  runner = new ProjectionRunner({ pool: app.db.pool, logger: silentLogger, projections: allProjections, batchSize: 100, pollIntervalMs: 20 });
  runner.start();
  account = await createTestAccount(app.db.pool, { monthlyBudgetChf: 1, now: NOW });
  keyA = (await createKey(app, account.sessionToken, "key A")).id;
  keyB = (await createKey(app, account.sessionToken, "key B")).id;
  const accountId = account.accountId;
  const usage = [
    // April (current period); the 250 micro-CHF usage is a Batch API line's (batchDiscountBps)
    { keyId: keyA, model: "m1", promptTokens: 100, completionTokens: 50, reasoningTokens: 10, costMicroChf: 1500, finishedAt: "2025-04-01T00:00:00.000Z" },
    {
      keyId: keyA,
      model: "m2",
      promptTokens: 10,
      completionTokens: 5,
      reasoningTokens: 0,
      costMicroChf: 250,
      finishedAt: "2025-04-14T08:00:00.000Z",
      batchDiscountBps: 5000,
    },
    { keyId: keyB, model: "m1", promptTokens: 7, completionTokens: 3, reasoningTokens: 0, costMicroChf: 125_000, finishedAt: "2025-04-14T09:30:00.000Z" },
    // March (previous period, inside the 30-day window for March 17+)
    { keyId: keyA, model: "m1", promptTokens: 1, completionTokens: 1, reasoningTokens: 0, costMicroChf: 3, finishedAt: "2025-03-31T23:59:59.000Z" },
    // January: outside the window, counted in the totals
    { keyId: keyB, model: "m2", promptTokens: 2, completionTokens: 2, reasoningTokens: 0, costMicroChf: 5, finishedAt: "2025-01-10T10:00:00.000Z" },
  ];
  const recorder = new UsageRecorder(app.db.pool);
  for (const u of usage) expect(await recorder.record(usageEvent({ accountId, ...u }).data, {})).toBe("recorded");
  // A request in progress: 0.2 CHF held.
  expect((await placeHold(app.db.pool, { holdId: randomUUID(), accountId, amountMicroChf: 200_000, now: NOW })).ok).toBe(true);
  const projected = await eventuallyTrue(async () => {
    const r = await app.db.pool.query("SELECT sum(requests)::int AS n FROM rm_account_usage_daily WHERE account_id = $1", [accountId]);
    return r.rows[0].n === usage.length;
  });
  expect(projected).toBe(true);
});

afterAll(async () => {
  await runner?.stop();
  await app?.close();
});

const USAGE = "/api/v1/accounts/user/usage";

describe("GET /api/v1/accounts/user/usage", () => {
  it("defaults to the current billing period grouped by day, with the period's budget, spent, held and remaining", async () => {
    const res = await app.request("GET", USAGE, { token: account.sessionToken });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ object: "list", start_date: "2025-04-01", end_date: "2025-04-30", group_by: "day" });
    // spent = 1500 + 250 + 125000 micro-CHF (April only); held = 200000; budget 1 CHF.
    expect(res.body.period).toEqual({
      start: "2025-04-01",
      end: "2025-04-30",
      resets_at: "2025-05-01T00:00:00.000Z",
      budget_chf: 1,
      spent_chf: 0.12675,
      held_chf: 0.2,
      remaining_chf: 0.67325,
    });
    expect(res.body.data).toEqual([
      {
        date: "2025-04-01",
        requests: 1,
        prompt_tokens: 100,
        completion_tokens: 50,
        reasoning_tokens: 10,
        total_tokens: 150,
        cost_chf: 0.0015,
        batch_requests: 0,
        batch_cost_chf: 0,
      },
      {
        date: "2025-04-14",
        requests: 2,
        prompt_tokens: 17,
        completion_tokens: 8,
        reasoning_tokens: 0,
        total_tokens: 25,
        cost_chf: 0.12525,
        batch_requests: 1,
        batch_cost_chf: 0.00025,
      },
    ]);
    expect(res.body.total).toEqual({
      requests: 3,
      prompt_tokens: 117,
      completion_tokens: 58,
      reasoning_tokens: 10,
      total_tokens: 175,
      cost_chf: 0.12675,
      batch_requests: 1,
      batch_cost_chf: 0.00025,
    });
  });

  it("groups by key and by model over any range of up to 366 days", async () => {
    const byKey = await app.request("GET", `${USAGE}?start_date=2025-01-01&end_date=2025-04-30&group_by=key`, { token: account.sessionToken });
    expect(byKey.status, byKey.text).toBe(200);
    const expectedKeys = [
      {
        key_id: keyA,
        name: "key A",
        requests: 3,
        prompt_tokens: 111,
        completion_tokens: 56,
        reasoning_tokens: 10,
        total_tokens: 167,
        cost_chf: 0.001753,
        batch_requests: 1,
        batch_cost_chf: 0.00025,
      },
      {
        key_id: keyB,
        name: "key B",
        requests: 2,
        prompt_tokens: 9,
        completion_tokens: 5,
        reasoning_tokens: 0,
        total_tokens: 14,
        cost_chf: 0.125005,
        batch_requests: 0,
        batch_cost_chf: 0,
      },
    ].sort((a, b) => (a.key_id < b.key_id ? -1 : 1));
    expect(byKey.body.data).toEqual(expectedKeys);

    const byModel = await app.request("GET", `${USAGE}/?start_date=2025-03-31&end_date=2025-03-31&group_by=model`, { token: account.sessionToken });
    expect(byModel.status, byModel.text).toBe(200);
    expect(byModel.body.data).toEqual([
      {
        model: "m1",
        requests: 1,
        prompt_tokens: 1,
        completion_tokens: 1,
        reasoning_tokens: 0,
        total_tokens: 2,
        cost_chf: 0.000003,
        batch_requests: 0,
        batch_cost_chf: 0,
      },
    ]);

    const leapYear = await app.request("GET", `${USAGE}?start_date=2024-01-01&end_date=2024-12-31`, { token: account.sessionToken });
    expect(leapYear.status, leapYear.text).toBe(200);
    expect(leapYear.body.data).toEqual([]);
  });

  it("answers 400 naming the parameter for bad dates, reversed or too long ranges and unknown grouping", async () => {
    const cases: [string, string][] = [
      ["start_date=2025-02-30", "start_date"],
      ["start_date=20250101", "start_date"],
      ["end_date=yesterday", "end_date"],
      ["start_date=2025-04-10&end_date=2025-04-09", "end_date"],
      ["start_date=2024-01-01&end_date=2025-01-01", "end_date"],
      ["group_by=week", "group_by"],
      ["month=2025-04", "month"],
    ];
    for (const [query, param] of cases) {
      expectError(await app.request("GET", `${USAGE}?${query}`, { token: account.sessionToken }), 400, "invalid_request_error", { param });
    }
  });

  it("needs a session", async () => {
    expect((await app.request("GET", USAGE)).status).toBe(401);
  });

  it("shows only the caller's usage", async () => {
    const other = await createTestAccount(app.db.pool, { now: NOW });
    const res = await app.request("GET", `${USAGE}?start_date=2025-01-01&end_date=2025-04-30`, { token: other.sessionToken });
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual([]);
    expect(res.body.period).toMatchObject({ spent_chf: 0, held_chf: 0 });
  });
});

describe("usage in the key and account views", () => {
  it("fills each key's usage stats from the read models: totals and the last 30 days", async () => {
    const res = await app.request("GET", KEYS_PATH, { token: account.sessionToken });
    expect(res.status, res.text).toBe(200);
    const keys: any[] = res.body.data ?? res.body;
    const a = keys.find((k) => k.id === keyA);
    expect(a.usage.total_requests).toBe(3);
    expect(a.usage.total_cost_chf).toBe(0.001753);
    const window = a.usage.last_30_days as { date: string; requests: number; cost_chf: number }[];
    expect(window).toHaveLength(30);
    expect(window.at(-1)!.date).toBe("2025-04-15");
    expect(window.filter((d) => d.requests > 0)).toEqual([
      { date: "2025-03-31", requests: 1, cost_chf: 0.000003 },
      { date: "2025-04-01", requests: 1, cost_chf: 0.0015 },
      { date: "2025-04-14", requests: 1, cost_chf: 0.00025 },
    ]);
    const b = keys.find((k) => k.id === keyB);
    expect(b.usage).toMatchObject({ total_requests: 2, total_cost_chf: 0.125005 });
  });

  it("shows the current period in GET /api/v1/accounts/user", async () => {
    const res = await app.request("GET", "/api/v1/accounts/user", { token: account.sessionToken });
    expect(res.status, res.text).toBe(200);
    expect(res.body.current_period).toEqual({
      start: "2025-04-01",
      end: "2025-04-30",
      resets_at: "2025-05-01T00:00:00.000Z",
      budget_chf: 1,
      spent_chf: 0.12675,
      held_chf: 0.2,
      remaining_chf: 0.67325,
    });
  });
});
