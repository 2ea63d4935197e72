import Router from "@koa/router";
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AppDeps } from "../../src/api/appDeps.ts";
import { budgetRefusalError } from "../../src/api/inference/admission/budgetRefusalError.ts";
import { placeHold } from "../../src/ledger/budget/placeHold.ts";
import { startTestApp, type TestApp } from "../support/testApp.ts";
import { createBudgetedAccount, setBudget } from "./usageFixtures.ts";

const NOW = new Date("2025-08-31T22:00:00.000Z");

/** A stand-in inference handler: a hold, refused with budgetRefusalError as admitWithHold does, then 200. */
function admissionRoutes(deps: AppDeps): Router {
  const router = new Router();
  router.post("/test/admit/:accountId/:amount", async (ctx) => {
    const hold = await placeHold(deps.pool, {
      holdId: randomUUID(),
      accountId: ctx.params.accountId!,
      amountMicroChf: Number(ctx.params.amount),
      now: deps.clock.now(),
    });
    if (!hold.ok) throw budgetRefusalError(hold);
    ctx.body = { hold_id: hold.holdId };
  });
  return router;
}

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ routes: [admissionRoutes], clock: { now: () => NOW } });
});
afterAll(async () => {
  await app.close();
});

describe("admission over HTTP", () => {
  it("answers 429 rate_limit_exceeded / monthly_budget_exceeded, saying when the period resets, without Retry-After", async () => {
    const accountId = await createBudgetedAccount(app.db.pool, 10_000);
    expect((await app.request("POST", `/test/admit/${accountId}/6000`)).status).toBe(200);
    // More than the budget leaves whatever the request in progress gives back.
    const refused = await app.request("POST", `/test/admit/${accountId}/12000`);
    expect(refused.status, refused.text).toBe(429);
    expect(refused.headers.get("retry-after")).toBeNull();
    expect(refused.headers.get("x-should-retry")).toBe("false");
    expect(refused.body.error).toMatchObject({ type: "rate_limit_exceeded", code: "monthly_budget_exceeded", param: null });
    expect(refused.body.error.message).toContain("2025-09-01");
    expect(refused.body.error.message).toMatch(/resets/);
  });

  it("tells a request refused only for what requests in progress hold to retry after Retry-After", async () => {
    const accountId = await createBudgetedAccount(app.db.pool, 10_000);
    expect((await app.request("POST", `/test/admit/${accountId}/6000`)).status).toBe(200);
    // Nothing spent: once the request in progress ends (it gives back what it does not use) this one may fit.
    const refused = await app.request("POST", `/test/admit/${accountId}/6000`);
    expect(refused.status, refused.text).toBe(429);
    // 1 to 3 s, so that clients refused together do not retry together.
    expect(["1", "2", "3"]).toContain(refused.headers.get("retry-after"));
    expect(refused.headers.get("x-should-retry")).toBe("true");
    expect(refused.body.error).toMatchObject({ type: "rate_limit_exceeded", code: "monthly_budget_exceeded", param: null });
    expect(refused.body.error.message).toMatch(/^Monthly budget in use: .* held by requests in progress .* retry after the time in Retry-After/);
  });

  it("answers 402 subscription_required (message and type only) once the subscription is cancelled", async () => {
    const accountId = await createBudgetedAccount(app.db.pool, 10_000);
    await setBudget(app.db.pool, accountId, 10_000, "inactive");
    const res = await app.request("POST", `/test/admit/${accountId}/1`);
    expect(res.status).toBe(402);
    expect(res.body).toEqual({ error: { message: expect.any(String), type: "subscription_required" } });
  });
});
