import { describe, expect, it } from "vitest";
import type { HoldRefused } from "../../../ledger/budget/placeHold.ts";
import { BudgetInUseError, budgetRefusalError } from "./budgetRefusalError.ts";

const refusal = (figures: { amount: number; budget: number; spent: number; held: number }): HoldRefused => ({
  ok: false,
  reason: "monthly_budget_exceeded",
  period: { start: "2026-11-01", end: "2026-11-30", nextStart: "2026-12-01" },
  amountMicroChf: figures.amount,
  budgetMicroChf: figures.budget,
  spentMicroChf: figures.spent,
  heldMicroChf: figures.held,
});

describe("budgetRefusalError", () => {
  it("is 'in use' (retry) while other requests hold the budget, and final once the spending leaves no room", () => {
    const inUse = budgetRefusalError(refusal({ amount: 787, budget: 1000, spent: 13, held: 787 }));
    expect(inUse).toBeInstanceOf(BudgetInUseError);
    expect(inUse.headers["x-should-retry"]).toBe("true");
    const spent = budgetRefusalError(refusal({ amount: 787, budget: 1000, spent: 300, held: 0 }));
    expect(spent).not.toBeInstanceOf(BudgetInUseError);
    expect(spent.headers["x-should-retry"]).toBe("false");
  });

  it("is 'in use' when the holds that refused it were given back before its figures were read (held 0 by then)", () => {
    // A batch line refused while the batch's other lines held the budget; they settled before the read.
    const error = budgetRefusalError(refusal({ amount: 787, budget: 1000, spent: 13, held: 0 }));
    expect(error).toBeInstanceOf(BudgetInUseError);
    expect(error.headers["retry-after"]).toMatch(/^[1-3]$/);
    expect(error.message).toContain("Monthly budget in use");
  });

  it("is final for a request of several prompts whose holds together do not fit what the spending leaves", () => {
    const error = budgetRefusalError(refusal({ amount: 400, budget: 1000, spent: 300, held: 400 }), { ownHoldsMicroChf: 800, ownHeldMicroChf: 400 });
    expect(error).not.toBeInstanceOf(BudgetInUseError);
  });
});
