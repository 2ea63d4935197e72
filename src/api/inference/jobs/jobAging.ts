import { jobPriority, laneBase, laneOfPriority } from "../../../contracts/lanes.ts";

/** How long a job waits at its fair-share rank before it ages, and how often its rank is halved after that. */
export const AGING_AFTER_MS = 2_000;
export const AGING_STEP_MS = 1_000;

/** A priority aged one step: its rank within its lane halved (the lane's first rank stays). */
export function agedPriority(priority: number): number {
  const base = laneBase(laneOfPriority(priority));
  return base + Math.floor((priority - base) / 2);
}

/**
 * A waiting job's priority aged one step, no further than the rank its account's jobs ahead of it give
 * (`ahead`: running, or waiting since before it): a backlog ages ahead of other accounts' newer jobs only
 * down to where its account's share stands, so an account with fewer jobs in flight (one with none: an
 * idle account's first request) goes first, or right after the backlog's oldest job, rather than behind
 * every job of the backlog that aged to the lane's first rank.
 */
export function agedPriorityAbove(priority: number, ahead: number): number {
  return Math.min(priority, Math.max(agedPriority(priority), jobPriority(laneOfPriority(priority), ahead)));
}
