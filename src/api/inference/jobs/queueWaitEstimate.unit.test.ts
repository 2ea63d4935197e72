import { describe, expect, it } from "vitest";
import { QueueWaitEstimate } from "./queueWaitEstimate.ts";

describe("QueueWaitEstimate", () => {
  it("has no estimate before a job of the model was seen", () => {
    expect(new QueueWaitEstimate().expectedMs("m", 3)).toBeUndefined();
  });

  it("scales the wait per place in line by the position", () => {
    const estimate = new QueueWaitEstimate();
    estimate.observe("m", 4, 2000);
    expect(estimate.expectedMs("m", 1)).toBe(500);
    expect(estimate.expectedMs("m", 6)).toBe(3000);
    expect(estimate.expectedMs("other", 1)).toBeUndefined();
  });

  it("moves toward new observations and forgets stale ones", () => {
    let now = 0;
    const estimate = new QueueWaitEstimate({ weight: 0.5, staleMs: 1000, now: () => now });
    estimate.observe("m", 1, 100);
    estimate.observe("m", 1, 300);
    expect(estimate.expectedMs("m", 1)).toBe(200);
    now = 2000;
    expect(estimate.expectedMs("m", 1)).toBeUndefined();
    estimate.observe("m", 2, 1000);
    expect(estimate.expectedMs("m", 1)).toBe(500);
  });

  it("ignores impossible observations", () => {
    const estimate = new QueueWaitEstimate();
    estimate.observe("m", 0, 100);
    estimate.observe("m", 1, -5);
    expect(estimate.expectedMs("m", 1)).toBeUndefined();
  });
});
