import { setImmediate as afterIo } from "node:timers/promises";
import { Worker, type Job } from "bullmq";
import { CompletionJobSchema, type CompletionJob } from "../../src/contracts/completionJob.ts";
import type { Redis } from "../../src/redis/createRedis.ts";
import type { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import type { Logger } from "../../src/observability/logger.ts";
import { BlockingJobFetch } from "./blockingJobFetch.ts";
import type { CompletionJobRunner } from "./completionJobRunner.ts";
import { JobLocks } from "./jobLocks.ts";

/** A job this worker fetched: BullMQ always gives a fetched job its id. */
type HeldJob = Job<CompletionJob> & { id: string };

/** Most fetch lanes at once while jobs keep arriving (a burst); one while the queue is drained. */
const MAX_LANES = 64;
/** After a fetch failed (Redis unreachable), the loop waits this long before the next one. */
const FETCH_RETRY_MS = 1_000;
/** The job runner's signal: jobs are stopped by the API's cancels (JobCancellations), not by the queue. */
const NEVER_ABORTED = new AbortController().signal;

/**
 * The BullMQ consumer of one model's queue: takes up to `concurrency` jobs at once, parses each job's
 * data and hands it to the runner.
 *
 * It fetches jobs itself (BullMQ's manual processing: `moveToCompleted`, the locks extended by
 * JobLocks) with one blocking Redis connection, because both ways of letting BullMQ's own loop fetch
 * put a Redis round trip on the way to an idle worker's first token:
 * - one BullMQ worker of concurrency N fetches again right after a job arrived and starts that job
 *   only once the second fetch has answered;
 * - N BullMQ workers of concurrency 1: taking a job re-adds the queue's marker (BullMQ's
 *   `moveToActive`), which wakes another idle worker, whose fetch finds nothing but is handled by this
 *   process in the same moment as the arrived job.
 * And BullMQ's blocking fetch itself takes two round trips (the marker, then the job):
 * BlockingJobFetch takes a job arriving at an idle worker in one.
 * Here the fetch after a job goes out only once that job has started (its engine request written:
 * everything up to it runs before the next `setImmediate`); while fetches keep finding jobs (a burst),
 * more fetch lanes run at once (#addLane), one of them on the blocking connection, the others with
 * BullMQ's non-blocking fetch on the command connection.
 */
export class CompletionWorker {
  readonly modelId: string;
  readonly #worker: Worker<CompletionJob>;
  readonly #blockingFetch: BlockingJobFetch<CompletionJob>;
  /** True while a lane's fetch waits on the blocking connection (it serves one at a time). */
  #blockingFetchOut = false;
  readonly #locks: JobLocks;
  readonly #capacity: number;
  readonly #runner: Pick<CompletionJobRunner, "run">;
  readonly #logger: Logger;
  /** job id -> the job's processing (settles when it finished and left the active list). */
  readonly #running = new Map<string, Promise<void>>();
  #slotFreed: (() => void) | null = null;
  #closing = false;
  #lanes = 0;
  /** Fetches on their way: each may bring a job, so each holds a slot until it answers. */
  #fetching = 0;
  readonly #laneRuns = new Set<Promise<void>>();
  #tokens = 0;

  constructor(options: {
    modelId: string;
    redis: Redis;
    keys: InferenceKeys;
    concurrency: number;
    runner: Pick<CompletionJobRunner, "run">;
    logger: Logger;
    /** How long a job's lock lasts unless extended (BullMQ's default, 30 s; tests make it short). */
    lockDurationMs?: number;
  }) {
    this.modelId = options.modelId;
    this.#capacity = Math.max(1, options.concurrency);
    this.#runner = options.runner;
    this.#logger = options.logger;
    const lockDuration = options.lockDurationMs ?? 30_000;
    this.#worker = new Worker<CompletionJob>(options.keys.queueName(options.modelId), null, {
      connection: options.redis,
      prefix: options.keys.prefix,
      autorun: false,
      lockDuration,
      // A job whose worker died is not re-run: its client already saw part of the output.
      maxStalledCount: 0,
      removeOnComplete: { count: 0 },
      removeOnFail: { age: 3600, count: 1000 },
    });
    this.#worker.on("error", (error) => this.#logger.warn("queue worker error", { model: this.modelId, error }));
    this.#blockingFetch = new BlockingJobFetch(this.#worker, lockDuration);
    this.#locks = new JobLocks(this.#worker, lockDuration, (jobIds) =>
      this.#logger.warn("could not extend the lock of running jobs", { model: this.modelId, jobIds }),
    );
  }

  /** Starts consuming and resolves once the worker is connected. */
  async start(): Promise<void> {
    await this.#worker.waitUntilReady();
    await this.#worker.startStalledCheckTimer();
    this.#locks.start();
    this.#addLane();
  }

  /** Stops taking jobs and waits for the running ones to finish. */
  async close(): Promise<void> {
    this.#closing = true;
    this.#slotFreed?.();
    // BullMQ's close marks the worker closing, so the blocked fetch, interrupted right after, ends
    // without retrying. The connection the worker was given stays open (BullMQ does not close a
    // connection it did not create): the running jobs can still be completed.
    const closingWorker = this.#worker.close();
    await this.#worker.backend.disconnectBlocking(false).catch(() => undefined);
    await closingWorker;
    while (this.#laneRuns.size > 0) await Promise.all(this.#laneRuns);
    while (this.#running.size > 0) await Promise.all(this.#running.values());
    this.#locks.stop();
  }

  /**
   * One fetch lane: fetches a job, starts it, lets it run up to its engine request, and fetches again.
   * Two jobs in a row mean a backlog: another lane starts, so a burst is taken up by up to MAX_LANES
   * fetches in flight. A lane whose fetch found nothing ends unless it is the last one, which then
   * blocks on the queue's marker until a job arrives.
   */
  #addLane(): void {
    this.#lanes += 1;
    const lane = this.#runLane();
    this.#laneRuns.add(lane);
    void lane.finally(() => this.#laneRuns.delete(lane));
  }

  async #runLane(): Promise<void> {
    let foundLast = false;
    while (!this.#closing) {
      if (this.#running.size + this.#fetching >= this.#capacity) {
        if (this.#lanes > 1) break;
        await new Promise<void>((resolve) => (this.#slotFreed = resolve));
        this.#slotFreed = null;
        continue;
      }
      const found = await this.#fetchAndStart();
      if (!found) {
        if (this.#lanes > 1) break;
        foundLast = false;
        continue;
      }
      if (foundLast && this.#lanes < Math.min(MAX_LANES, this.#capacity - this.#running.size - this.#fetching)) this.#addLane();
      foundLast = true;
      // The job just started runs up to its engine request before this lane's next fetch is sent.
      await afterIo();
    }
    // Counted down here, in the same microtask as the check above, so two lanes never both leave.
    this.#lanes -= 1;
  }

  /**
   * Fetches one job and starts it; false when there was none (or the fetch failed). The fetch waits for
   * a job on the blocking connection when that is free, else it only looks (the lane then ends or, as
   * the last lane, blocks next time).
   */
  async #fetchAndStart(): Promise<boolean> {
    const token = `${this.#worker.id}:${this.#tokens++}`;
    const blocking = !this.#blockingFetchOut;
    let job: Job<CompletionJob> | undefined;
    this.#fetching += 1;
    if (blocking) this.#blockingFetchOut = true;
    try {
      job = blocking ? await this.#blockingFetch.fetch(token) : await this.#worker.getNextJob(token, { block: false });
    } catch (error) {
      if (this.#closing) return false;
      this.#logger.warn("could not fetch a job", { model: this.modelId, error: error as Error });
      await new Promise((resolve) => setTimeout(resolve, FETCH_RETRY_MS));
      return false;
    } finally {
      this.#fetching -= 1;
      if (blocking) this.#blockingFetchOut = false;
    }
    // A job fetched while closing runs too: it is ours (locked), and close() waits for it.
    if (job?.id === undefined) return false;
    this.#start(job as HeldJob, token);
    return true;
  }

  #start(job: HeldJob, token: string): void {
    this.#locks.track(job.id, token);
    const processing = this.#process(job, token).finally(() => {
      this.#locks.untrack(job.id);
      this.#running.delete(job.id);
      this.#slotFreed?.();
    });
    this.#running.set(job.id, processing);
  }

  async #process(job: HeldJob, token: string): Promise<void> {
    try {
      const parsed = CompletionJobSchema.safeParse(job.data);
      if (!parsed.success) {
        this.#logger.error("invalid job data", { jobId: job.id, issues: parsed.error.issues.slice(0, 3) });
        throw new Error("invalid job data");
      }
      await this.#runner.run(parsed.data, NEVER_ABORTED);
    } catch (error) {
      await job.moveToFailed(error as Error, token, false).catch((failure: unknown) => this.#couldNotFinish(job, failure));
      return;
    }
    await job.moveToCompleted(null, token, false).catch((failure: unknown) => this.#couldNotFinish(job, failure));
  }

  #couldNotFinish(job: HeldJob, error: unknown): void {
    this.#logger.warn("could not move a finished job out of the active list", { model: this.modelId, jobId: job.id, error: error as Error });
  }
}
