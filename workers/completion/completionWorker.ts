import { Queue, Worker, type Job } from "bullmq";
import { throttledWarning } from "../../src/observability/throttledWarning.ts";
import { CompletionJobSchema, type CompletionJob } from "../../src/contracts/completionJob.ts";
import type { Redis } from "../../src/redis/createRedis.ts";
import type { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import type { Logger } from "../../src/observability/logger.ts";
import type { RunMode } from "./resumption.ts";
import type { PlatformMetrics } from "../../src/observability/metrics.ts";
import { recordQueueWait } from "./queueWaitSpan.ts";
import type { TenantCounters } from "../../src/contracts/tenantCounters.ts";
import type { Usage } from "../../src/contracts/deltaMessage.ts";
import type { CompletionJobRunner } from "./completionJobRunner.ts";
import { boundedCloseBackend } from "./boundedCloseBackend.ts";
import { LostJobStandIns, type LostPrefixOf, type RunningHere } from "./lostJobStandIns.ts";
import type { ReplayReader } from "./replayReader.ts";

/** The job runner's signal: jobs are stopped by the API's cancels (JobCancellations), not by the queue. */
const NEVER_ABORTED = new AbortController().signal;

/** How long a job's last message waits for its end in its account's counters (#endsFirst). */
const TENANT_END_WAIT_MS = 1_000;

/** How often a job whose worker died is handed out again; once more and BullMQ fails it. */
const MAX_STALLED_RESTARTS = 1;

/** BullMQ's reason for a job failed after stalling more than MAX_STALLED_RESTARTS times. */
const STALLED_TOO_OFTEN = /stalled more than allowable limit/;

/** Slots per fetch loop, and the most fetch loops one model's consumer runs (see `fetchLoopsFor`). */
const SLOTS_PER_FETCH_LOOP = 8;
const MAX_FETCH_LOOPS = 4;

/**
 * How many BullMQ workers (fetch loops) share a model's `concurrency` slots: one per 8 slots, at most 4.
 * A BullMQ worker takes jobs one at a time (it awaits each fetch's round trip before the next), so one
 * loop caps how fast jobs start at one per round trip, and under load a round trip is several
 * milliseconds: at 32 closed-loop clients a job waited 18-41 ms (p50) between its enqueue and its
 * start behind a single loop, 7-9 ms behind four (docs/benchmarks.md). Each loop holds one blocking
 * connection while the queue is empty, hence the cap.
 */
export function fetchLoopsFor(concurrency: number): number {
  return Math.min(MAX_FETCH_LOOPS, Math.max(1, Math.ceil(concurrency / SLOTS_PER_FETCH_LOOP)));
}

export type CompletionWorkerOptions = {
  modelId: string;
  redis: Redis;
  keys: InferenceKeys;
  concurrency: number;
  runner: Pick<CompletionJobRunner, "run"> & Partial<Pick<CompletionJobRunner, "sentBefore">>;
  /** The replay streams (a lost job's stand-in carries what Redis lost of its messages); none: not carried. */
  replay?: Pick<ReplayReader, "firstSeq">;
  logger: Logger;
  /** How long a job's lock lasts unless renewed (default 30 s, BullMQ's; the worker role passes WORKER_LOCK_MS). */
  lockDurationMs?: number;
  /** How often the stalled-job check runs (default 30 s, BullMQ's; the worker role passes WORKER_STALLED_CHECK_MS). */
  stalledIntervalMs?: number;
  /** The worker role's job metrics (queue wait, started/completed/failed/stalled, busy slots); none when absent. */
  metrics?: PlatformMetrics["jobs"];
  /**
   * The per-account counters of scheduling and rate limits (TenantCounters): a job taken waits no more
   * and counts in flight for another `inFlightTtlMs`; a job that ended (finished, failed, cancelled, or
   * failed after its workers died) counts no more, and the tokens counted for it at admission that it
   * did not use go back to their rate window. None: nothing reported (the entries expire).
   */
  tenants?: { counters: TenantCounters; inFlightTtlMs: number };
};

/**
 * The BullMQ consumer of one model's queue: BullMQ `Worker`s whose concurrencies add up to the model's
 * slot count (one per 8 slots, at most 4: `fetchLoopsFor`), with a processor that parses each job's
 * data and hands it to the runner.
 *
 * Everything about the queue is BullMQ's own, through its public API: the fetch loops (one blocking
 * connection each while the queue is empty), the renewal of the running jobs' locks (every half lock
 * duration), the stalled-job check (run by the first of the workers only: one check per process and
 * model, as with one worker), moving a finished job to completed (removed) or failed.
 *
 * A job whose worker died is noticed by BullMQ's stalled check, run by every worker of the queue every
 * `stalledIntervalMs`: a job still active whose lock ran out (not renewed for `lockDurationMs`) goes
 * back to the queue, once (`maxStalledCount` 1), and the worker that takes it runs it as "redelivered":
 * the runner picks up what the dead worker delivered (resumption.ts) instead of running it blindly
 * again. A job whose workers died twice is failed by BullMQ without reaching the processor; the
 * `failed` event then has the runner end its stream with an error ("abandoned"), so its client is not
 * left waiting.
 *
 * The trade-off of a short lock: a worker whose event loop is blocked for longer than the lock (its
 * renewals are timers) is taken for dead, and its jobs continue elsewhere while it may still write. The
 * engines generate off the event loop (llama.cpp's threads, the network), so only a pathological stall
 * does that; the default lock is 5 s (WORKER_LOCK_MS).
 */
export class CompletionWorker {
  readonly modelId: string;
  readonly #workers: Worker<CompletionJob, void>[] = [];
  readonly #runner: Pick<CompletionJobRunner, "run">;
  readonly #logger: Logger;
  readonly #metrics: PlatformMetrics["jobs"] | undefined;
  readonly #concurrency: number;
  readonly #tenants: { counters: TenantCounters; inFlightTtlMs: number } | undefined;
  #running: Promise<void> | null = null;
  #closing = false;
  readonly #abandoning = new Set<Promise<void>>();
  /** The jobs running here (restoreTenantEntries), by id with their run (stand-ins of jobs Redis lost). */
  readonly #runningJobs = new Map<string, RunningHere>();
  /** The queue itself, for stand-ins of running jobs that Redis lost. */
  readonly #queue: Queue<CompletionJob>;
  readonly #standIns: LostJobStandIns;
  readonly #warnQueueError: (error: Error) => void;

  constructor(options: CompletionWorkerOptions) {
    this.modelId = options.modelId;
    this.#runner = options.runner;
    this.#logger = options.logger;
    this.#metrics = options.metrics;
    this.#concurrency = Math.max(1, options.concurrency);
    this.#tenants = options.tenants;
    // While Redis is away BullMQ reports each failed fetch, several a second per fetch loop: a few lines
    // per model instead, whichever of its loops reports.
    const warn = throttledWarning(this.#logger, "queue worker error");
    this.#warnQueueError = (error) => warn({ model: this.modelId, error });
    this.#queue = new Queue<CompletionJob>(options.keys.queueName(options.modelId), { connection: options.redis, prefix: options.keys.prefix });
    this.#queue.on("error", this.#warnQueueError);
    this.#standIns = new LostJobStandIns({
      queue: this.#queue,
      delayMs: options.lockDurationMs ?? 30_000,
      logger: this.#logger,
      lostPrefixOf: lostPrefixOf(options.runner, options.replay),
    });
    const loops = fetchLoopsFor(this.#concurrency);
    for (let i = 0; i < loops; i++) {
      // The slots split as evenly as they go (10 slots: 5 and 5; 20: 7, 7 and 6).
      const concurrency = Math.floor(this.#concurrency / loops) + (i < this.#concurrency % loops ? 1 : 0);
      this.#workers.push(this.#createWorker(options, concurrency, i === 0));
    }
  }

  #createWorker(
    options: Pick<CompletionWorkerOptions, "modelId" | "redis" | "keys" | "lockDurationMs" | "stalledIntervalMs">,
    concurrency: number,
    checksStalled: boolean,
  ): Worker<CompletionJob, void> {
    const processor = (job: Job<CompletionJob, void>) => this.#process(job);
    const worker = new Worker<CompletionJob, void>(
      options.keys.queueName(options.modelId),
      processor,
      {
        connection: options.redis,
        prefix: options.keys.prefix,
        autorun: false,
        concurrency,
        lockDuration: options.lockDurationMs ?? 30_000,
        ...(options.stalledIntervalMs === undefined ? {} : { stalledInterval: options.stalledIntervalMs }),
        ...(checksStalled ? {} : { skipStalledCheck: true }),
        // A job whose worker died runs once more, picking up what was delivered (see the class comment).
        maxStalledCount: MAX_STALLED_RESTARTS,
        removeOnComplete: { count: 0 },
        removeOnFail: { age: 3600, count: 1000 },
      },
      // Its close is bounded when Redis was away a moment before (boundedCloseBackend.ts).
      boundedCloseBackend(() => this.#closing),
    );
    worker.on("error", this.#warnQueueError);
    worker.on("lockRenewalFailed", (jobIds) => {
      this.#logger.warn("could not extend the lock of running jobs", { model: this.modelId, jobIds });
      for (const id of jobIds) {
        const running = this.#runningJobs.get(id);
        if (running) void this.#standIns.renewalFailed(running);
      }
    });
    worker.on("stalled", (jobId) => {
      this.#metrics?.stalled.inc({ model: this.modelId });
      this.#logger.warn("a job's worker stopped renewing its lock: another worker continues the job", { model: this.modelId, jobId });
    });
    worker.on("failed", (job, error) => this.#onFailed(job, error));
    return worker;
  }

  /** Starts consuming and resolves once the worker is connected. */
  async start(): Promise<void> {
    await Promise.all(this.#workers.map((worker) => worker.waitUntilReady()));
    this.#metrics?.slots.set({ model: this.modelId }, this.#concurrency);
    this.#metrics?.slotsBusy.set({ model: this.modelId }, 0);
    this.#running = Promise.all(
      this.#workers.map((worker) =>
        worker.run().catch((error: unknown) => {
          this.#logger.error("queue worker stopped", { model: this.modelId, error: error as Error });
        }),
      ),
    ).then(() => undefined);
  }

  /** Stops taking jobs and waits for the running ones to finish (BullMQ's graceful close). */
  async close(): Promise<void> {
    // The connection the workers were given stays open (BullMQ does not close a connection it did not
    // create); their own blocking connections are closed.
    this.#closing = true;
    await Promise.all(this.#workers.map((worker) => worker.close()));
    await this.#running;
    await Promise.all(this.#abandoning);
    await this.#queue.close();
    this.#metrics?.slots.remove({ model: this.modelId });
    this.#metrics?.slotsBusy.remove({ model: this.modelId });
  }

  async #process(job: Job<CompletionJob, void>): Promise<void> {
    const parsed = CompletionJobSchema.safeParse(job.data);
    if (!parsed.success) {
      this.#logger.error("invalid job data", { jobId: job.id, issues: parsed.error.issues.slice(0, 3) });
      this.#metrics?.failed.inc({ model: this.modelId });
      throw new Error("invalid job data");
    }
    // BullMQ counts the times a job was found stalled (its worker died); attempts cannot retry (attempts: 1).
    // A stand-in of a job Redis lost is one handed out again too.
    const mode: RunMode = job.stalledCounter > 0 || job.attemptsStarted > 1 || parsed.data.runsBefore !== undefined ? "redelivered" : "new";
    if (mode === "new") recordQueueWait(parsed.data, job.timestamp, Date.now());
    this.#tenantStarted(parsed.data);
    const run = runOf(job);
    this.#runningJobs.set(parsed.data.completionId, { job: parsed.data, run });
    const metrics = this.#metrics;
    if (!metrics) {
      const used = await this.#runner.run(parsed.data, NEVER_ABORTED, mode, run, this.#endsFirst(parsed.data)).catch(async (error: unknown) => {
        await this.#ranHere(parsed.data, run);
        this.#tenantEnded(parsed.data);
        throw error;
      });
      await this.#ranHere(parsed.data, run);
      this.#tenantEnded(parsed.data, used);
      return;
    }
    const model = { model: this.modelId };
    // Enqueue (the API's clock) to pickup (this one's): a job handed out again waited for its first worker's death instead.
    if (mode === "new") {
      const waitedSeconds = Math.max(0, Date.now() - job.timestamp) / 1000;
      metrics.queueWait.observe(model, waitedSeconds);
      metrics.queueWaitByLane.observe({ ...model, lane: parsed.data.lane ?? "interactive" }, waitedSeconds);
    }
    metrics.started.inc({ ...model, mode });
    metrics.slotsBusy.inc(model);
    let used: Usage | null = null;
    try {
      used = await this.#runner.run(parsed.data, NEVER_ABORTED, mode, run, this.#endsFirst(parsed.data));
      metrics.completed.inc(model);
    } catch (error) {
      metrics.failed.inc(model);
      throw error;
    } finally {
      metrics.slotsBusy.dec(model);
      await this.#ranHere(parsed.data, run);
      this.#tenantEnded(parsed.data, used);
    }
  }

  /** The job's run here ended: it runs here no more, and its stand-in, if Redis lost it, goes. */
  #ranHere(job: CompletionJob, run: number): Promise<void> {
    if (this.#runningJobs.get(job.completionId)?.run === run) this.#runningJobs.delete(job.completionId);
    return this.#standIns.ended(job.completionId);
  }

  /**
   * Redis is back (connected again): the jobs running here are written again in their accounts' in-flight
   * sets, which a Redis restarted without its data lost (its accounts could otherwise run their
   * concurrency limit again beside them). Harmless when nothing was lost. A job leaves #runningJobs
   * before its final release, which goes on the same connection behind any restore sent before it.
   */
  restoreTenantEntries(): void {
    const tenants = this.#tenants;
    if (!tenants) return;
    for (const { job } of this.#runningJobs.values()) {
      tenants.counters.restoreRunning(job, tenants.inFlightTtlMs).catch((error: unknown) => {
        this.#logger.warn("could not count a running job in its account's counters again", { jobId: job.completionId, error: error as Error });
      });
    }
  }

  /** The job was taken: out of its account's and lane's waiting sets (reported without delaying the job). */
  #tenantStarted(job: CompletionJob): void {
    const tenants = this.#tenants;
    if (!tenants) return;
    const failed = (error: unknown) =>
      this.#logger.warn("could not report a job started to the tenant counters", { jobId: job.completionId, error: error as Error });
    tenants.counters.started(job, tenants.inFlightTtlMs).catch(failed);
    tenants.counters.laneLeft(job.model, job.lane ?? "interactive", job.completionId).catch(failed);
  }

  /**
   * The job's end in its account's counters, before its last message goes out (its client may send its
   * next request on it, and find its place among the requests in progress still taken): waited for, at
   * most TENANT_END_WAIT_MS (Redis slow: the message goes out, the release goes on; the end of #process
   * releases again, which changes nothing then).
   */
  #endsFirst(job: CompletionJob): (used: Usage) => Promise<void> {
    return async (used) => {
      let timer: NodeJS.Timeout | undefined;
      const waited = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, TENANT_END_WAIT_MS);
      });
      await Promise.race([this.#tenantEnded(job, used), waited]);
      clearTimeout(timer);
    };
  }

  /**
   * The job ended: its account's in-flight, concurrency and waiting entries go (idempotent; they would
   * expire anyway), and of the tokens counted at its admission (the job carries them) those it did not
   * use (`used`: the usage it charged) go back to the window they were counted in: the worker's call of a
   * job's end (the API sends none), made right before its last message (#endsFirst) and again once it
   * ended (whatever way it did). Without a usage, nothing is given back.
   */
  #tenantEnded(job: CompletionJob, used: Usage | null = null): Promise<void> {
    const counted = job.countedTokens;
    const unused = counted && used ? { window: counted.window, tokens: counted.tokens - used.promptTokens - used.completionTokens } : undefined;
    if (!this.#tenants) return Promise.resolve();
    return this.#tenants.counters.release(job, unused).catch((error: unknown) => {
      this.#logger.warn("could not report a job ended to the tenant counters", { jobId: job.completionId, error: error as Error });
    });
  }

  /** A job failed for stalling too often: its stream is ended with an error (and what was delivered charged). */
  #onFailed(job: Job<CompletionJob, void> | undefined, error: Error): void {
    if (!job || !STALLED_TOO_OFTEN.test(error.message)) return;
    this.#metrics?.failed.inc({ model: this.modelId });
    const parsed = CompletionJobSchema.safeParse(job.data);
    if (!parsed.success) return;
    this.#logger.error("a job's workers died too often: its stream is ended with an error", { model: this.modelId, jobId: job.id });
    this.#tenantEnded(parsed.data);
    // After its last run: a run of its own, above every one BullMQ started.
    const ending = this.#runner.run(parsed.data, NEVER_ABORTED, "abandoned", runOf(job) + 1).then(
      () => undefined,
      (failure: unknown) => {
        this.#logger.error("could not end the stream of an abandoned job", { model: this.modelId, jobId: job.id, error: failure as Error });
      },
    );
    this.#abandoning.add(ending);
    void ending.finally(() => this.#abandoning.delete(ending));
  }
}

/** Which run of the job this is (ReplayFence): BullMQ counts every start of a job in Redis, atomically, as it hands it out. */
function runOf(job: Job<CompletionJob, void>): number {
  return Math.max(1, job.attemptsStarted) + (job.data.runsBefore ?? 0);
}

/**
 * What a job running here delivered in the messages before the first one its replay stream holds now
 * (Redis lost them): its run's own count of them. Null while the stream holds no message yet, or nothing
 * was lost (the stream starts with message 0).
 */
function lostPrefixOf(runner: CompletionWorkerOptions["runner"], replay: CompletionWorkerOptions["replay"]): LostPrefixOf | undefined {
  if (!replay || !runner.sentBefore) return undefined;
  const sentBefore = runner.sentBefore.bind(runner);
  return async (job) => {
    const first = await replay.firstSeq(job.completionId);
    if (first === null || first === 0) return null;
    const sent = sentBefore(job.completionId, first);
    return sent ? { throughSeq: first - 1, tokens: sent.tokens, reasoning: sent.reasoning, uncounted: sent.uncounted } : null;
  };
}
