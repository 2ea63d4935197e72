import { describe, expect, it } from "vitest";
import type { PlaceHoldResult } from "../../../ledger/budget/placeHold.ts";
import { SpeculationPolicy } from "./speculationPolicy.ts";

const period = { start: "2026-11-01", end: "2026-11-30", nextStart: "2026-12-01" };
const placed = (remainingMicroChf: number): PlaceHoldResult => ({ ok: true, holdId: "h", period, remainingMicroChf });
const refused: PlaceHoldResult = {
  ok: false,
  reason: "monthly_budget_exceeded",
  period,
  amountMicroChf: 10,
  budgetMicroChf: 10,
  spentMicroChf: 10,
  heldMicroChf: 0,
};

describe("SpeculationPolicy", () => {
  const t0 = new Date("2026-11-22T10:00:00.000Z");
  const later = (ms: number) => new Date(t0.getTime() + ms);

  it("is careful with an account it has not seen", () => {
    expect(new SpeculationPolicy().maySpeculate("a", 100, t0)).toBe(false);
  });

  it("speculates while the last hold left ample budget, recently", () => {
    const policy = new SpeculationPolicy({ headroomFactor: 8, freshForMs: 10_000 });
    policy.observe("a", placed(800), t0);
    expect(policy.maySpeculate("a", 100, later(1))).toBe(true);
    expect(policy.maySpeculate("a", 101, later(1))).toBe(false); // less than 8 holds' worth left
    expect(policy.maySpeculate("a", 100, later(10_001))).toBe(false); // too old to trust
    expect(policy.maySpeculate("b", 1, later(1))).toBe(false);
  });

  it("goes careful after a refusal or a failed hold", () => {
    const policy = new SpeculationPolicy();
    policy.observe("a", placed(1_000_000), t0);
    policy.observe("a", refused, t0);
    expect(policy.maySpeculate("a", 1, t0)).toBe(false);
    policy.observe("a", placed(1_000_000), t0);
    policy.forget("a");
    expect(policy.maySpeculate("a", 1, t0)).toBe(false);
  });

  it("remembers a bounded number of accounts, forgetting the oldest", () => {
    const policy = new SpeculationPolicy({ maxAccounts: 2 });
    for (const account of ["a", "b", "c"]) policy.observe(account, placed(1_000_000), t0);
    expect(["a", "b", "c"].map((account) => policy.maySpeculate(account, 1, t0))).toEqual([false, true, true]);
  });
});
