import { jobPriority, laneOfPriority } from "../../../contracts/lanes.ts";

/** How long a job waits at its fair-share rank before it is reranked, and how often it is reranked after that. */
export const RERANK_AFTER_MS = 2_000;
export const RERANK_STEP_MS = 1_000;

/**
 * A waiting job's priority at the rank its account's jobs ahead of it give now (`ahead`: running, or
 * waiting since before it), never raised: a rank is fixed when the job is queued (its account's jobs in
 * flight then) and goes stale as they end, so the job is moved up to where its account's share stands. A
 * backlog then goes ahead of the newer jobs of accounts with more jobs in flight, never ahead of an
 * account with fewer (an idle account's first request goes first, or right after the backlog's oldest
 * job), and two backlogs share the slots: each account's oldest waiting job ranks at its jobs running.
 */
export function rerankedPriority(priority: number, ahead: number): number {
  return Math.min(priority, jobPriority(laneOfPriority(priority), ahead));
}
