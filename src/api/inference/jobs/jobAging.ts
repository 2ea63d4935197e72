import { laneBase, laneOfPriority } from "../../../contracts/lanes.ts";

/** How long a job waits at its fair-share rank before it ages, and how often its rank is halved after that. */
export const AGING_AFTER_MS = 2_000;
export const AGING_STEP_MS = 1_000;

/** A priority aged one step: its rank within its lane halved (the lane's first rank stays). */
export function agedPriority(priority: number): number {
  const base = laneBase(laneOfPriority(priority));
  return base + Math.floor((priority - base) / 2);
}
