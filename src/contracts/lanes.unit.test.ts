import { describe, expect, it } from "vitest";
import { jobPriority, LANE_WIDTH, laneBase, laneOfPriority, MAX_PRIORITY } from "./lanes.ts";

describe("jobPriority", () => {
  it("ranks an account's n-th job in flight behind every other account's earlier ones", () => {
    // A has 5 jobs in flight, B none: B's next job (1) goes before A's next (6), and before A's 2nd (2).
    expect(jobPriority("interactive", 0)).toBe(1);
    expect(jobPriority("interactive", 5)).toBe(6);
    expect(jobPriority("interactive", 0)).toBeLessThan(jobPriority("interactive", 1));
  });

  it("keeps every lane in its own range: any interactive job before any background job before any batch job", () => {
    const worstInteractive = jobPriority("interactive", Number.MAX_SAFE_INTEGER);
    const bestBackground = jobPriority("background", 0);
    const worstBackground = jobPriority("background", 10 ** 9);
    const bestBatch = jobPriority("batch", 0);
    expect(worstInteractive).toBeLessThan(bestBackground);
    expect(worstBackground).toBeLessThan(bestBatch);
    expect(jobPriority("batch", 10 ** 9)).toBeLessThanOrEqual(MAX_PRIORITY);
    expect(jobPriority("interactive", 0)).toBeGreaterThanOrEqual(1);
  });

  it("maps a priority back to its lane", () => {
    expect(laneOfPriority(jobPriority("interactive", 3))).toBe("interactive");
    expect(laneOfPriority(jobPriority("background", 3))).toBe("background");
    expect(laneOfPriority(jobPriority("batch", 3))).toBe("batch");
    expect(laneOfPriority(jobPriority("batch", 10 ** 9))).toBe("batch");
    expect(laneBase("background")).toBe(LANE_WIDTH);
  });

  it("treats a negative or fractional count as its floor, never below the lane", () => {
    expect(jobPriority("interactive", -4)).toBe(1);
    expect(jobPriority("background", 2.7)).toBe(LANE_WIDTH + 2);
  });
});
