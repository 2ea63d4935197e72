import type { Queue } from "bullmq";
import { type CompletionJob, RUN_COMPLETION } from "../../src/contracts/completionJob.ts";
import { jobPriority } from "../../src/contracts/lanes.ts";
import type { Logger } from "../../src/observability/logger.ts";

/** A job running here, as its stand-in would carry it. */
export type RunningHere = { job: CompletionJob; run: number };

/** What a running job delivered in messages Redis lost (CompletionJob's `lostPrefix`), or null while not known. */
export type LostPrefixOf = (job: CompletionJob) => Promise<CompletionJob["lostPrefix"] | null>;

/**
 * Stand-ins for running jobs that Redis lost. A Redis without persistence that restarts empty loses the
 * BullMQ job of every running completion, its lock with it: the worker goes on generating (its writes
 * wait for Redis and land in the replay stream), but should it then die, BullMQ's stalled check has
 * nothing to hand on. The job was never continued: its clients heard nothing until JOB_IDLE_TIMEOUT_MS,
 * its usage was never recorded, its budget hold waited for the sweeper.
 *
 * So the worker watches for it: when the lock of a job running here cannot be renewed and BullMQ has no
 * job of that id any more, it adds a stand-in, the same job under the same id (BullMQ's public
 * `Queue.add`), delayed by the lock's duration, and pushes that delay back at every renewal that fails
 * while the job runs here (`Job.changeDelay`), as a lock is renewed. Should the worker die, the stand-in
 * comes due a lock's duration later and a worker takes it as a job handed out again: its runs numbered
 * after the lost job's (`runsBefore`, so the replay fence holds against a first run that was only cut
 * off), it continues what the replay stream holds, or ends it with an error and charges what was
 * delivered. When the job ends here, its stand-in is removed (one that a worker took meanwhile, active
 * and locked, is not: that run supersedes this one).
 */
export class LostJobStandIns {
  readonly #queue: Queue<CompletionJob>;
  readonly #delayMs: number;
  readonly #logger: Logger;
  /** The jobs that have a stand-in placed by this worker. */
  readonly #placed = new Set<string>();
  /** The jobs whose step is in progress, before any stand-in (a second failed renewal waits for it). */
  readonly #steps = new Map<string, Promise<void>>();
  readonly #ended = new Set<string>();

  readonly #lostPrefixOf: LostPrefixOf;

  constructor(options: { queue: Queue<CompletionJob>; delayMs: number; logger: Logger; lostPrefixOf?: LostPrefixOf }) {
    this.#queue = options.queue;
    this.#delayMs = options.delayMs;
    this.#logger = options.logger;
    this.#lostPrefixOf = options.lostPrefixOf ?? (() => Promise.resolve(null));
  }

  /** The lock of a job running here could not be renewed: a stand-in if BullMQ lost the job, its delay pushed back if placed. */
  renewalFailed(running: RunningHere): Promise<void> {
    const id = running.job.completionId;
    const before = this.#steps.get(id) ?? Promise.resolve();
    const step = before
      .then(() => this.#keep(running))
      .catch((error: unknown) => {
        this.#logger.warn("could not place or keep a stand-in for a running job Redis lost", { jobId: id, error: error as Error });
      });
    this.#steps.set(id, step);
    void step.finally(() => {
      if (this.#steps.get(id) === step) this.#steps.delete(id);
    });
    return step;
  }

  /** The job ended here: its stand-in, if any, is removed (after any step in progress on it). */
  async ended(jobId: string): Promise<void> {
    if (!this.#placed.has(jobId) && !this.#steps.has(jobId)) return;
    this.#ended.add(jobId);
    try {
      await this.#steps.get(jobId);
      if (!this.#placed.has(jobId)) return;
      this.#placed.delete(jobId);
      // Removed unless a worker took it meanwhile (BullMQ does not remove a locked job).
      await this.#queue.remove(jobId).catch((error: unknown) => {
        this.#logger.warn("could not remove the stand-in of a job that ended", { jobId, error: error as Error });
      });
    } finally {
      this.#ended.delete(jobId);
    }
  }

  async #keep({ job, run }: RunningHere): Promise<void> {
    const id = job.completionId;
    if (this.#ended.has(id)) return;
    const existing = await this.#queue.getJob(id);
    if (existing === undefined) {
      // What its messages lost with Redis delivered goes with it, to be charged by the run that ends it.
      const lostPrefix = await this.#lostPrefixOf(job).catch(() => null);
      await this.#queue.add(
        RUN_COMPLETION,
        { ...job, runsBefore: run, ...(lostPrefix ? { lostPrefix } : {}) },
        {
          jobId: id,
          delay: this.#delayMs,
          priority: job.priority ?? jobPriority(job.lane ?? "interactive", 0),
          attempts: 1,
          removeOnComplete: true,
          removeOnFail: { age: 3600, count: 1000 },
        },
      );
      if (!this.#placed.has(id)) this.#logger.warn("Redis lost a running job: a stand-in continues it should this worker die", { jobId: id });
      this.#placed.add(id);
      return;
    }
    // Our stand-in, not yet due: its delay starts over (as a lock renewed). Anything else (the job itself,
    // or a stand-in a worker took) is left alone.
    if (existing.data.runsBefore !== run || !(await existing.isDelayed())) return;
    await existing.changeDelay(this.#delayMs);
    // Placed before the replay stream held a message again (what was lost was not known yet): now.
    if (existing.data.lostPrefix === undefined) {
      const lostPrefix = await this.#lostPrefixOf(job).catch(() => null);
      if (lostPrefix) await existing.updateData({ ...existing.data, lostPrefix });
    }
  }
}
