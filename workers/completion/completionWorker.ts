import { Worker, type Job } from "bullmq";
import { CompletionJobSchema, type CompletionJob } from "../../src/messaging/completionJob.ts";
import type { Redis } from "../../src/messaging/createRedis.ts";
import type { InferenceKeys } from "../../src/messaging/inferenceKeys.ts";
import type { Logger } from "../../src/observability/logger.ts";
import type { CompletionJobRunner } from "./completionJobRunner.ts";

/**
 * The BullMQ consumer of one model's queue: parses each job's data and hands it to the runner.
 *
 * One BullMQ worker (one fetch loop, one blocking Redis connection) per job the model may run at once,
 * each with concurrency 1. A BullMQ worker whose concurrency allows another job fetches again right
 * after a job arrived and starts the arrived job only once that fetch has answered: with one worker of
 * concurrency 16, every job reaching an idle worker waited for a `moveToActive` round trip to Redis
 * (which found nothing) before its engine call. At concurrency 1 nothing is fetched while a job runs,
 * so it starts at once; and a burst is taken up by many loops in parallel, not one Redis round trip
 * after the other. The price is one Redis connection per slot (256 for a model that runs 256 streams).
 */
export class CompletionWorker {
  readonly modelId: string;
  readonly #workers: Worker<CompletionJob>[];

  constructor(options: {
    modelId: string;
    redis: Redis;
    keys: InferenceKeys;
    concurrency: number;
    runner: Pick<CompletionJobRunner, "run">;
    logger: Logger;
  }) {
    this.modelId = options.modelId;
    const { runner, logger } = options;
    const loops = Math.max(1, options.concurrency);
    this.#workers = Array.from({ length: loops }, (_, loop) => {
      const worker = new Worker<CompletionJob>(
        options.keys.queueName(options.modelId),
        async (job: Job<CompletionJob>, _token?: string, signal?: AbortSignal) => {
          const parsed = CompletionJobSchema.safeParse(job.data);
          if (!parsed.success) {
            logger.error("invalid job data", { jobId: job.id, issues: parsed.error.issues.slice(0, 3) });
            throw new Error("invalid job data");
          }
          await runner.run(parsed.data, signal ?? new AbortController().signal);
        },
        {
          connection: options.redis,
          prefix: options.keys.prefix,
          concurrency: 1,
          autorun: false,
          // A job whose worker died is not re-run: its client already saw part of the output.
          maxStalledCount: 0,
          // The loops share the queue: one looking for stalled jobs (a Lua script every 30 s) is enough.
          skipStalledCheck: loop > 0,
          removeOnComplete: { count: 0 },
          removeOnFail: { age: 3600, count: 1000 },
        },
      );
      worker.on("error", (error) => logger.warn("queue worker error", { model: options.modelId, error }));
      return worker;
    });
  }

  /** Starts consuming and resolves once the worker is connected. */
  async start(): Promise<void> {
    for (const worker of this.#workers) void worker.run().catch(() => undefined);
    await Promise.all(this.#workers.map((w) => w.waitUntilReady()));
  }

  /** Stops taking jobs and waits for the running ones to finish. */
  async close(): Promise<void> {
    await Promise.all(this.#workers.map((w) => w.close()));
  }
}
