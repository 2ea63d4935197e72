import { describe, expect, it } from "vitest";
import { jobPriority, laneBase, laneOfPriority } from "../../../contracts/lanes.ts";
import { agedPriority, agedPriorityAbove } from "./jobAging.ts";

describe("agedPriority", () => {
  it("halves the rank within the job's lane, down to the lane's first rank, never into a higher lane", () => {
    for (const lane of ["interactive", "background", "batch"] as const) {
      let priority = jobPriority(lane, 31);
      const steps: number[] = [];
      while (agedPriority(priority) < priority) {
        priority = agedPriority(priority);
        steps.push(priority - laneBase(lane));
        expect(laneOfPriority(priority)).toBe(lane);
      }
      expect(steps).toEqual([15, 7, 3, 1, 0]);
      expect(priority).toBe(laneBase(lane));
    }
  });
});

describe("agedPriorityAbove", () => {
  it("ages no further than the rank of the account's jobs ahead of it, and never raises a priority", () => {
    const start = jobPriority("interactive", 40);
    expect(agedPriorityAbove(start, 0)).toBe(jobPriority("interactive", 20));
    expect(agedPriorityAbove(start, 30)).toBe(jobPriority("interactive", 30));
    expect(agedPriorityAbove(jobPriority("interactive", 8), 8)).toBe(jobPriority("interactive", 8));
    // Queued at rank 2, its account now has 5 ahead of it: it stays where it is.
    expect(agedPriorityAbove(jobPriority("batch", 2), 5)).toBe(jobPriority("batch", 2));
    let priority = jobPriority("background", 31);
    while (agedPriorityAbove(priority, 3) < priority) priority = agedPriorityAbove(priority, 3);
    expect(priority).toBe(jobPriority("background", 3));
  });
});
