import { describe, expect, it } from "vitest";
import { jobPriority, laneBase, laneOfPriority } from "../../../contracts/lanes.ts";
import { agedPriority } from "./jobAging.ts";

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
