import type { CompletionJob } from "../../../contracts/completionJob.ts";
import type { DeltaMessage } from "../../../contracts/deltaMessage.ts";
import { laneBase, laneOfPriority } from "../../../contracts/lanes.ts";
import type { CompletionFeed } from "./completionFeed.ts";
import { RERANK_AFTER_MS, RERANK_STEP_MS, rerankedPriority } from "./jobAging.ts";

/**
 * The first rerank tick at or after `at`: ticks fall on whole multiples of RERANK_STEP_MS of the clock, so
 * every waiting job of an account is reranked at the same moments, from counts read within milliseconds of
 * each other. Each job on a timer of its own read its count up to a second apart from its neighbour's: a
 * later job then ranked ahead of an earlier one of the same account, from a count taken after a job ended
 * (a probe saw an account's request overtaken by its own next one, with two workers).
 */
export function untilTick(at: number): number {
  return Math.ceil(at / RERANK_STEP_MS) * RERANK_STEP_MS;
}

/** Less time than this left before a wait's deadline: no rerank. */
const RERANK_MIN_LEFT_MS = 50;

/** How long a rerank waits for the account's jobs ahead of the job to be read (Redis slow or away: no rerank). */
const RERANK_READ_MS = 250;

export type WaitingJobRerankerDeps = {
  /**
   * The job's account's jobs of its model running or waiting since before it (TenantCounters.ahead; null:
   * it waits no more): where a waiting job is reranked to.
   */
  aheadOf: (job: CompletionJob) => Promise<number | null>;
  /** Moves the waiting job to this priority (BullMQ changePriority). */
  changePriority: (job: CompletionJob, priority: number) => Promise<void>;
};

/**
 * The wait of an API process for its job's first message, during which the job is reranked: its rank is
 * fixed when it is queued (its account's jobs in flight then) and goes stale as they end, so an account
 * with more jobs in flight than another would wait behind every later job of that other account for as
 * long as it keeps the workers busy. At the first tick (untilTick) after RERANK_AFTER_MS of waiting, and
 * at every tick after that, its rank is set to its account's jobs ahead of it now, running or waiting
 * since before it, when that is lower (rerankedPriority, which says what that gives).
 */
export class WaitingJobReranker {
  readonly #deps: WaitingJobRerankerDeps;

  constructor(deps: WaitingJobRerankerDeps) {
    this.#deps = deps;
  }

  /** The job's first message, within `startTimeoutMs` (undefined: none came, or the feed ended or was lost). */
  async firstMessage(feed: CompletionFeed, job: CompletionJob, startTimeoutMs: number): Promise<DeltaMessage | undefined> {
    const deadline = Date.now() + startTimeoutMs;
    let priority = job.priority;
    let wait = Math.min(startTimeoutMs, untilTick(Date.now() + RERANK_AFTER_MS) - Date.now());
    for (;;) {
      const message = await feed.next(wait);
      const left = deadline - Date.now();
      if (message || feed.lost || feed.closed || left <= 0) return message;
      // No rerank in a wait's last moments (a timer may fire a millisecond before its deadline): the job is
      // about to be given up, and its neighbours, ending their waits on the same tick, rerank nothing either.
      if (left >= RERANK_MIN_LEFT_MS && priority !== undefined && priority > laneBase(laneOfPriority(priority))) {
        const reranked = await this.#reranked(job, priority);
        if (reranked < priority) void this.#deps.changePriority(job, reranked).catch(() => undefined);
        priority = reranked;
        wait = Math.max(0, Math.min(deadline - Date.now(), untilTick(Date.now() + 1) - Date.now()));
      } else {
        wait = left;
      }
    }
  }

  /** A waiting job's priority reranked; unchanged when its account's jobs ahead of it cannot be read within RERANK_READ_MS. */
  async #reranked(job: CompletionJob, priority: number): Promise<number> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<undefined>((resolve) => {
      timer = setTimeout(() => resolve(undefined), RERANK_READ_MS);
    });
    const ahead = await Promise.race([this.#deps.aheadOf(job).catch(() => undefined), late]);
    clearTimeout(timer);
    // Not known, or the job waits no more (a worker took it): no rerank.
    return ahead === undefined || ahead === null ? priority : rerankedPriority(priority, ahead);
  }
}
