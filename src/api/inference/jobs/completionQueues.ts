import { Job, Queue } from "bullmq";
import { CANCEL_MARK_TTL_SECONDS, type CancelReason, encodeCancelMessage } from "../../../contracts/cancelMessage.ts";
import { RUN_COMPLETION, type CompletionJob } from "../../../contracts/completionJob.ts";
import { redisAway, type Redis } from "../../../redis/createRedis.ts";
import { writeTogetherThisTurn } from "../../../redis/writeTogether.ts";
import type { InferenceKeys } from "../../../contracts/inferenceKeys.ts";
import { ServiceUnavailableError } from "../../http/errors.ts";
import { jobPriority } from "../../../contracts/lanes.ts";

/**
 * Asking BullMQ for the count of every priority up to a job's own costs Redis one ZCOUNT each, in one
 * script that blocks Redis meanwhile: an account's job ranked deeper than this (its 17th in flight on
 * the model, or a lower lane's) is told the whole waiting count, an upper bound of its place, already
 * read. (At 512, one account with 256 streams made Redis run about 110 ZCOUNTs per request: 0.4-0.6 ms
 * of its CPU, a fifth of the platform's per request; docs/benchmarks.md.)
 */
const MAX_PRIORITIES_COUNTED = 16;

/**
 * The producer side of the per-model BullMQ queues (one Queue object per model, created on first use,
 * all on one shared Redis connection).
 */
export class CompletionQueues {
  readonly #redis: Redis;
  readonly #keys: InferenceKeys;
  readonly #queues = new Map<string, Queue<CompletionJob>>();

  constructor(redis: Redis, keys: InferenceKeys) {
    this.#redis = redis;
    this.#keys = keys;
  }

  queue(modelId: string): Queue<CompletionJob> {
    let queue = this.#queues.get(modelId);
    if (!queue) {
      queue = new Queue<CompletionJob>(this.#keys.queueName(modelId), { connection: this.#redis, prefix: this.#keys.prefix });
      queue.on("error", () => undefined);
      this.#queues.set(modelId, queue);
    }
    return queue;
  }

  /** Whether the connection is down after having been up: nothing is sent then (a command would fail, or BullMQ would wait for Redis). */
  get away(): boolean {
    return redisAway(this.#redis);
  }

  /**
   * Enqueues the job with jobId = completion id. One attempt only: a generation that failed half-way is
   * not silently re-run (its deltas were already sent). Finished jobs are removed; failed ones kept a while.
   * Fails at once with redis_unavailable while the connection is down: a queue created then would wait
   * for Redis to come back (BullMQ's start-up), and the job could be queued long after its client gave up.
   * Every job has a BullMQ priority (lanes.ts: its lane and its account's fair-share rank; never 0, which
   * BullMQ would serve before every prioritized job).
   */
  async enqueue(job: CompletionJob): Promise<void> {
    if (this.away) throw new ServiceUnavailableError("redis");
    await this.queue(job.model).add(RUN_COMPLETION, job, {
      jobId: job.completionId,
      priority: job.priority ?? jobPriority(job.lane ?? "interactive", 0),
      attempts: 1,
      removeOnComplete: true,
      removeOnFail: { age: 3600, count: 1000 },
    });
  }

  /**
   * The commands issued on the queues' connection (shared with the completion records and the worker
   * presence) from now to the end of this event-loop turn leave in one socket write; `last` runs at the
   * end of the turn and its commands go with them (writeTogetherThisTurn).
   */
  writeTogetherThisTurn(last: () => void): void {
    writeTogetherThisTurn(this.#redis, last);
  }

  /** Jobs waiting for a worker of the model (BullMQ's waiting and prioritized jobs: every job here has a priority). */
  async waitingCount(modelId: string): Promise<number> {
    return this.queue(modelId).getJobCountByTypes("waiting", "prioritized");
  }

  /** Whether Redis answers a PING on the request path's connection now (within its command timeout). */
  async answers(): Promise<boolean> {
    return this.#redis.ping().then(
      () => true,
      () => false,
    );
  }

  /**
   * Where a job of this priority stands in the model's queue: the waiting jobs a worker takes before or
   * with it (every priority up to its own, itself included), through BullMQ's public getCountsPerPriority.
   * A priority too far down (MAX_PRIORITIES_COUNTED) is answered with the whole waiting count: `waiting`
   * when the caller has it, or read.
   */
  async positionOf(modelId: string, priority: number, waiting?: number): Promise<number> {
    if (priority > MAX_PRIORITIES_COUNTED) return waiting ?? this.waitingCount(modelId);
    const priorities = Array.from({ length: priority + 1 }, (_, p) => p);
    const counts = await this.queue(modelId).getCountsPerPriority(priorities);
    return Object.values(counts).reduce((sum, n) => sum + n, 0);
  }

  /**
   * Gives a waiting job another BullMQ priority (its aging: InferenceGateway), through BullMQ's public
   * Job.changePriority (one script; a job a worker took meanwhile keeps its place, only its recorded
   * priority changes). A job BullMQ no longer has is a rejection the caller ignores.
   */
  async changePriority(modelId: string, completionId: string, priority: number): Promise<void> {
    await new Job(this.queue(modelId), RUN_COMPLETION, {}, {}, completionId).changePriority({ priority });
  }

  /**
   * Removes a job that no worker has taken yet: true when it was removed or is gone (finished and
   * removed: BullMQ answers 1 for a job it does not have), false when a worker runs it (locked).
   */
  async removeWaiting(modelId: string, completionId: string): Promise<boolean> {
    const queue = this.queue(modelId);
    // A job a worker took stays, even when its lock ran out with its dead worker (BullMQ would remove it
    // then): a worker's stalled check hands it to another, which finds its cancel and charges what it
    // generated. Removed, its partial reply would be charged by nobody and its hold left to the sweeper.
    const state = await queue.getJobState(completionId);
    if (state === "active") return false;
    // Not in the queue (Redis restarted without its data): a worker runs it still if its replay stream
    // holds messages (the worker writes them again there); that worker ends it. Only one without any
    // never ran (BullMQ answers a removal of a job it lacks as done: it was taken for one never run, its
    // stream ended with a message numbered 0 behind the running reply's, which its client never saw).
    if (state === "unknown" && (await this.#redis.exists(this.#keys.replayStream(completionId))) === 1) return false;
    return (await queue.remove(completionId)) === 1;
  }

  /**
   * Stops a job: takes it off the queue (answers true: it never ran, or the queue lost it with Redis),
   * and tells the workers (InferenceKeys.cancelChannel, and the job's cancel mark; the one running it
   * aborts it: a refused admission is not charged, a user's or an abandoned job is charged for what it
   * generated, a lost one for what its client received: `deliveredThroughSeq`); false: a worker runs it.
   */
  async cancel(modelId: string, completionId: string, reason: CancelReason = "refused", deliveredThroughSeq?: number): Promise<boolean> {
    const removed = await this.removeWaiting(modelId, completionId);
    // Told to the workers even when the queue does not have the job: after Redis lost its data, a job a
    // worker still runs is no longer in the queue (BullMQ answers a removal of a job it lacks as done).
    const message = encodeCancelMessage({ completionId, reason, ...(deliveredThroughSeq === undefined ? {} : { deliveredThroughSeq }) });
    // Kept beside the message: a worker whose subscription is away now misses the message, and reads
    // the mark once it is back (JobCancellations). One transaction: the mark is there before the message.
    const results = await this.#redis
      .multi()
      .set(this.#keys.cancelMark(completionId), message, "EX", CANCEL_MARK_TTL_SECONDS)
      .publish(this.#keys.cancelChannel(), message)
      .exec();
    const failed = results?.find(([error]) => error !== null)?.[0];
    if (failed) throw failed;
    return removed;
  }

  async close(): Promise<void> {
    await Promise.all([...this.#queues.values()].map((q) => q.close()));
    this.#queues.clear();
  }
}
