import { Worker, type Job } from "bullmq";
import { CompletionJobSchema, type CompletionJob } from "../../src/contracts/completionJob.ts";
import type { Redis } from "../../src/redis/createRedis.ts";
import type { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import type { Logger } from "../../src/observability/logger.ts";
import type { CompletionJobRunner } from "./completionJobRunner.ts";

/** The job runner's signal: jobs are stopped by the API's cancels (JobCancellations), not by the queue. */
const NEVER_ABORTED = new AbortController().signal;

/**
 * The BullMQ consumer of one model's queue: one BullMQ `Worker` whose concurrency is the model's slot
 * count, with a processor that parses each job's data and hands it to the runner.
 *
 * Everything about the queue is BullMQ's own, through its public API: the fetch loop (one blocking
 * connection per model, whatever the concurrency), the renewal of the running jobs' locks (every half
 * lock duration), the stalled-job check, moving a finished job to completed (removed) or failed.
 *
 * A job whose worker died (its lock expired) is not re-run: its client already saw part of the output
 * and its usage may be recorded. With `maxStalledCount: 0`, BullMQ's stalled check (run by any worker of
 * the queue) takes the job off the active list and marks it to fail ("job stalled more than allowable
 * limit"); the worker that fetches it next fails it without calling the processor.
 */
export class CompletionWorker {
  readonly modelId: string;
  readonly #worker: Worker<CompletionJob, void>;
  readonly #runner: Pick<CompletionJobRunner, "run">;
  readonly #logger: Logger;
  #running: Promise<void> | null = null;

  constructor(options: {
    modelId: string;
    redis: Redis;
    keys: InferenceKeys;
    concurrency: number;
    runner: Pick<CompletionJobRunner, "run">;
    logger: Logger;
    /** How long a job's lock lasts unless renewed (BullMQ's default, 30 s; tests make it short). */
    lockDurationMs?: number;
    /** How often the stalled-job check runs (BullMQ's default, 30 s; tests make it short). */
    stalledIntervalMs?: number;
  }) {
    this.modelId = options.modelId;
    this.#runner = options.runner;
    this.#logger = options.logger;
    this.#worker = new Worker<CompletionJob, void>(options.keys.queueName(options.modelId), (job) => this.#process(job), {
      connection: options.redis,
      prefix: options.keys.prefix,
      autorun: false,
      concurrency: Math.max(1, options.concurrency),
      lockDuration: options.lockDurationMs ?? 30_000,
      ...(options.stalledIntervalMs === undefined ? {} : { stalledInterval: options.stalledIntervalMs }),
      // A job whose worker died is not re-run: its client already saw part of the output.
      maxStalledCount: 0,
      removeOnComplete: { count: 0 },
      removeOnFail: { age: 3600, count: 1000 },
    });
    this.#worker.on("error", (error) => this.#logger.warn("queue worker error", { model: this.modelId, error }));
    this.#worker.on("lockRenewalFailed", (jobIds) => this.#logger.warn("could not extend the lock of running jobs", { model: this.modelId, jobIds }));
    this.#worker.on("stalled", (jobId) =>
      this.#logger.warn("a job's worker stopped renewing its lock: the job is failed, not re-run", { model: this.modelId, jobId }),
    );
  }

  /** Starts consuming and resolves once the worker is connected. */
  async start(): Promise<void> {
    await this.#worker.waitUntilReady();
    this.#running = this.#worker.run().catch((error: unknown) => {
      this.#logger.error("queue worker stopped", { model: this.modelId, error: error as Error });
    });
  }

  /** Stops taking jobs and waits for the running ones to finish (BullMQ's graceful close). */
  async close(): Promise<void> {
    // The connection the worker was given stays open (BullMQ does not close a connection it did not
    // create); its own blocking connection is closed.
    await this.#worker.close();
    await this.#running;
  }

  async #process(job: Job<CompletionJob, void>): Promise<void> {
    const parsed = CompletionJobSchema.safeParse(job.data);
    if (!parsed.success) {
      this.#logger.error("invalid job data", { jobId: job.id, issues: parsed.error.issues.slice(0, 3) });
      throw new Error("invalid job data");
    }
    await this.#runner.run(parsed.data, NEVER_ABORTED);
  }
}
