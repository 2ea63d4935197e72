import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { placeHolds } from "../../src/ledger/budget/placeHolds.ts";
import { createTestDatabase, type TestDatabase } from "../support/testDatabase.ts";
import { createBudgetedAccount, openHolds, setBudget } from "./usageFixtures.ts";

/**
 * A multi-prompt completion's holds, all or none in one statement (they were a transaction of a
 * statement per prompt, the budget row locked throughout: under a flood its waiters ran past the
 * statement timeout).
 */
let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db?.drop();
});

const holdsOf = (request: number, prompts: number, amount: number) =>
  Array.from({ length: prompts }, (_, i) => ({ holdId: `cmpl-r${request}-p${i}-${Date.now()}`, amountMicroChf: amount }));

describe("placeHolds", () => {
  it("given 20 requests of 3 holds at once on a budget for 3 of them, when placed, then 3 are placed whole and 17 refused whole", async () => {
    const accountId = await createBudgetedAccount(db.pool, 1_000);
    const results = await Promise.all(Array.from({ length: 20 }, (_, r) => placeHolds(db.pool, { accountId, holds: holdsOf(r, 3, 100), now: new Date() })));
    expect(results.filter((r) => r.ok)).toHaveLength(3);
    const refused = results.filter((r) => !r.ok);
    expect(refused).toHaveLength(17);
    expect(refused[0]).toMatchObject({ reason: "monthly_budget_exceeded", amountMicroChf: 300, budgetMicroChf: 1_000, heldMicroChf: 900 });
    expect(await openHolds(db.pool, accountId)).toBe(9);
    const row = await db.pool.query<{ held: string }>("SELECT held_micro_chf AS held FROM rm_budget WHERE account_id = $1", [accountId]);
    expect(Number(row.rows[0]!.held)).toBe(900);
  });

  it("given an inactive subscription, when placed, then refused as subscription_required and nothing is held", async () => {
    const accountId = await createBudgetedAccount(db.pool, 1_000);
    await setBudget(db.pool, accountId, 1_000, "inactive");
    const result = await placeHolds(db.pool, { accountId, holds: holdsOf(0, 2, 10), now: new Date() });
    expect(result).toMatchObject({ ok: false, reason: "subscription_required", amountMicroChf: 20 });
    expect(await openHolds(db.pool, accountId)).toBe(0);
  });
});
