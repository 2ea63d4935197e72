import { z } from "zod";

/**
 * The scheduling lanes of a model's queue: `interactive` (a client waits on the answer), `background`
 * (nobody waits right now, e.g. a Responses request with `background: true`), `batch` (Batch API lines).
 */
export const LaneSchema = z.enum(["interactive", "background", "batch"]);
export type Lane = z.infer<typeof LaneSchema>;
export const LANES: readonly Lane[] = LaneSchema.options;

/**
 * BullMQ priorities run from 1 (first) to 2^21 - 1 (0 would mean "no priority", taken before every
 * prioritized job: never used here). Each lane owns one contiguous range, higher lanes lower numbers,
 * so a worker takes a lower lane's job only when no higher lane's job waits. Inside a lane the priority
 * is the lane's base plus the number of the account's jobs already in flight on the model (waiting or
 * running): an account's n-th job ranks behind every other account's earlier ones, and equal
 * priorities are served first come, first served (BullMQ's order inside one priority). While the
 * account has jobs waiting, a new job's rank is never below its latest waiting job's (TenantCounters):
 * its jobs that ended meanwhile do not let its later jobs overtake its earlier ones.
 */
export const LANE_WIDTH = 2 ** 19;
const LANE_BASE: Record<Lane, number> = { interactive: 1, background: LANE_WIDTH, batch: 2 * LANE_WIDTH };
/** The highest priority BullMQ accepts. */
export const MAX_PRIORITY = 2 ** 21 - 1;

/** The BullMQ priority of a job of `lane` whose account has `inFlightBefore` jobs of the model already in flight. */
export function jobPriority(lane: Lane, inFlightBefore: number): number {
  const rank = Math.min(Math.max(0, Math.floor(inFlightBefore)), LANE_WIDTH - 2);
  return Math.min(LANE_BASE[lane] + rank, MAX_PRIORITY);
}

/** The lane a priority belongs to. */
export function laneOfPriority(priority: number): Lane {
  if (priority < LANE_BASE.background) return "interactive";
  if (priority < LANE_BASE.batch) return "background";
  return "batch";
}

/** The lowest priority number of a lane (its first rank). */
export function laneBase(lane: Lane): number {
  return LANE_BASE[lane];
}
