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

  it("says what a smaller request may cost when the final refusal leaves room for one, and not to retry this one", () => {
    // A probe: 331 of 1,158 spent; three prompts needing 993 were told "ask for a higher budget", two were admitted at once.
    const roomLeft = budgetRefusalError(refusal({ amount: 331, budget: 1158, spent: 331, held: 662 }), {
      ownHoldsMicroChf: 993,
      ownHeldMicroChf: 662,
      smallestMicroChf: 120,
    });
    expect(roomLeft.headers["x-should-retry"]).toBe("false");
    expect(roomLeft.message).toContain(
      "Do not retry this request before then: a smaller one that may cost at most CHF 0.000827 (fewer max_tokens, a shorter prompt, fewer prompts) fits now",
    );
    // A second probe: CHF 0.05 left, but the smallest request of this kind (its prompt, one token) costs CHF 0.121.
    const tooSmall = budgetRefusalError(refusal({ amount: 250_000, budget: 50_000, spent: 0, held: 0 }), { smallestMicroChf: 121_000 });
    expect(tooSmall.message).not.toContain("smaller one");
    expect(tooSmall.message).toContain("Do not retry before then; ask for a higher monthly budget to continue now.");
    const none = budgetRefusalError(refusal({ amount: 205, budget: 1, spent: 1, held: 0 }));
    expect(none.message).toContain("Do not retry before then; ask for a higher monthly budget to continue now.");
    expect(none.message).not.toContain("smaller one");
  });
});
