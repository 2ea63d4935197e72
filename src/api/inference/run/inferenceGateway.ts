import type { CompletionJob } from "../../../contracts/completionJob.ts";
import type { CompletionFeed } from "../relay/completionFeed.ts";
import type { CompletionQueues } from "../completionQueues.ts";
import type { DeltaMessage } from "../../../contracts/deltaMessage.ts";
import type { DeltaSubscriber } from "../relay/deltaSubscriber.ts";
import type { WorkerPresence } from "../../../contracts/workerPresence.ts";
import { InternalApiError, ModelUnavailableError, ServiceUnavailableError } from "../../http/errors.ts";
import { isRedisUnavailable } from "../../../redis/redisUnavailable.ts";

/** Raised by RunningJob.next() after release(): the listener went away (client disconnect), not the job. */
export class JobReleasedError extends Error {
  constructor() {
    super("stopped listening to the job");
    this.name = "JobReleasedError";
  }
}

/** For `.catch()` on a collected answer: the client went away (null), anything else is rethrown. */
export function nullIfReleased(error: unknown): null {
  if (error instanceof JobReleasedError) return null;
  throw error;
}

export type GatewayTimeouts = { jobStartTimeoutMs: number; jobIdleTimeoutMs: number };

/** A job a worker has started: its messages after `started`, in order. */
export type RunningJob = {
  completionId: string;
  /** The next message; throws api_error when the job stays silent for the idle timeout (redis_unavailable if Redis was away meanwhile). */
  next(): Promise<DeltaMessage>;
  /** Stops listening (client gone or answer complete); the job runs on. */
  release(): void;
};

/**
 * The API's side of the queue: checks that a worker serves the model, subscribes to the completion's
 * deltas, enqueues the job and waits for a worker to start it.
 */
export class InferenceGateway {
  readonly #presence: WorkerPresence;
  readonly #queues: CompletionQueues;
  readonly #subscriber: DeltaSubscriber;
  readonly #timeouts: GatewayTimeouts;

  constructor(deps: { presence: WorkerPresence; queues: CompletionQueues; subscriber: DeltaSubscriber; timeouts: GatewayTimeouts }) {
    this.#presence = deps.presence;
    this.#queues = deps.queues;
    this.#subscriber = deps.subscriber;
    this.#timeouts = deps.timeouts;
  }

  /**
   * Enqueues the job (with this process's reply channel; `onQueued` is called once Redis acknowledged
   * it) and resolves once a worker started it. No live
   * worker for the model, or the job not started within JOB_START_TIMEOUT_MS (it is then removed from
   * the queue) -> 503 model_unavailable. Redis away (or not answering in time) when the job is
   * enqueued -> 503 redis_unavailable at once: nothing waits for Redis to come back.
   */
  async start(request: Omit<CompletionJob, "replyTo">, onQueued?: () => void): Promise<RunningJob> {
    this.assertConnected();
    await this.#subscriber.ready;
    const job: CompletionJob = { ...request, replyTo: this.#subscriber.replyTo };
    const connections = this.#subscriber.connections;
    // Silence after Redis went away and came back (or while it is away) is the outage's, not the model's.
    const silent = (internal: string) =>
      this.#subscriber.away || this.#subscriber.connections !== connections ? new ServiceUnavailableError("redis") : new InternalApiError(internal);
    const feed = this.#subscriber.open(job.completionId);
    try {
      // The enqueue goes out first: it starts the way to the first token. The liveness check follows
      // right behind it, once BullMQ has written the job (setImmediate runs after the enqueue's
      // synchronous steps and microtasks), so Redis does not answer it before taking the job; both are
      // in flight together. Without a live worker the job is taken back off the queue; if a worker
      // appeared and took it meanwhile, it runs. A failed liveness check (the job is already queued) is
      // not a verdict: the start timeout decides.
      const enqueuing = this.#queues.enqueue(job);
      const checking = new Promise<boolean>((resolve, reject) => setImmediate(() => this.#presence.isLive(job.model).then(resolve, reject)));
      const [live, enqueued] = await Promise.allSettled([checking, enqueuing]);
      if (enqueued.status === "rejected") throw isRedisUnavailable(enqueued.reason) ? new ServiceUnavailableError("redis") : enqueued.reason;
      onQueued?.();
      if (live.status === "fulfilled" && !live.value && (await this.#queues.removeWaiting(job.model, job.completionId))) {
        throw unavailable(job.model);
      }
      await this.#awaitStart(feed, job, silent);
    } catch (error) {
      feed.close();
      throw error;
    }
    const idleMs = this.#timeouts.jobIdleTimeoutMs;
    return {
      completionId: job.completionId,
      async next() {
        const message = await feed.next(idleMs);
        if (message) return message;
        if (feed.closed) throw new JobReleasedError();
        feed.close();
        throw silent("The model stopped answering.");
      },
      release: () => feed.close(),
    };
  }

  /**
   * Throws 503 redis_unavailable while Redis is away: both connections must be up, the enqueue's and
   * the subscriber's that the job's replies come back on. Checked before anything else of a request.
   */
  assertConnected(): void {
    if (this.#queues.away || this.#subscriber.away) throw new ServiceUnavailableError("redis");
  }

  /**
   * Stops a job that start() enqueued but that must not run (its speculative admission was refused):
   * stops listening to it, then takes it off the queue or has its worker abort it.
   */
  async cancel(model: string, completionId: string): Promise<void> {
    this.#subscriber.stopListening(completionId);
    await this.#queues.cancel(model, completionId);
  }

  async #awaitStart(feed: CompletionFeed, job: CompletionJob, silent: (internal: string) => Error): Promise<void> {
    const first = await feed.next(this.#timeouts.jobStartTimeoutMs);
    if (first?.type === "started") return;
    if (first) throw new InternalApiError("The worker answered out of order.");
    if (await this.#queues.removeWaiting(job.model, job.completionId)) throw unavailable(job.model);
    // A worker took the job just now: its `started` is on the way.
    const late = await feed.next(this.#timeouts.jobIdleTimeoutMs);
    if (late?.type !== "started") throw silent("The worker did not start the job.");
  }
}

function unavailable(model: string): ModelUnavailableError {
  return new ModelUnavailableError(`The model '${model}' is temporarily unavailable. Retry after a short delay or use another model.`);
}
