import { describe, expect, it } from "vitest";
import { jobPriority, laneOfPriority } from "../../../contracts/lanes.ts";
import { rerankedPriority } from "./jobAging.ts";

describe("rerankedPriority", () => {
  it("moves a waiting job up to the rank of its account's jobs ahead of it, within its lane, and never down", () => {
    for (const lane of ["interactive", "background", "batch"] as const) {
      const queued = jobPriority(lane, 40);
      expect(rerankedPriority(queued, 3)).toBe(jobPriority(lane, 3));
      expect(rerankedPriority(queued, 0)).toBe(jobPriority(lane, 0));
      expect(laneOfPriority(rerankedPriority(queued, 0))).toBe(lane);
      // Queued at rank 2, its account now has 5 ahead of it: it stays where it is.
      expect(rerankedPriority(jobPriority(lane, 2), 5)).toBe(jobPriority(lane, 2));
    }
  });
});
