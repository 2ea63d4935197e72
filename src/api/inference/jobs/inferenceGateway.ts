import type { CompletionJob } from "../../../contracts/completionJob.ts";
import type { CompletionFeed } from "./completionFeed.ts";
import type { CompletionQueues } from "./completionQueues.ts";
import { type DeltaMessage, isTerminal } from "../../../contracts/deltaMessage.ts";
import type { AbandonmentWatch } from "./abandonmentWatch.ts";
import type { CompletionRecord, CompletionRecords } from "./completionRecords.ts";
import type { FollowedRecords } from "./followedRecords.ts";
import { jobErrorToApiError } from "./jobErrorToApiError.ts";
import { JobReleasedError, type RunningJob } from "./runningJob.ts";
import type { DeltaSubscriber } from "./deltaSubscriber.ts";
import type { WorkerPresence } from "../../../contracts/workerPresence.ts";
import { InternalApiError, ModelUnavailableError, modelTemporarilyUnavailable, ServerShuttingDownError, ServiceUnavailableError } from "../../http/errors.ts";
import { isRedisUnavailable } from "../../../redis/redisUnavailable.ts";
import { retryWhileAway, UNDO_RETRY } from "../../../redis/retryWhileAway.ts";
import { attempt, SharedReads } from "./sharedReads.ts";
import { WaitingJobReranker } from "./waitingJobReranker.ts";
import { StillQueuedError } from "./stillQueuedError.ts";
import { cancelLost } from "./cancelLost.ts";
import { RelayInterrupts } from "./relayInterrupts.ts";
import type { UndeliveredNotes } from "./undeliveredReplyNotes.ts";
import type { GatewayLimits, StartOptions } from "./gatewayOptions.ts";
import { recoverAfterRedisLoss } from "./redisLossRecovery.ts";
import { SHUTDOWN_END, UNAVAILABLE_END } from "./unstartedEnds.ts";

/**
 * How long one read of a model's waiting count, and one of its worker liveness, is shared by the
 * requests that need it: under load, requests that arrive within a few milliseconds of each other
 * send one ZCOUNT and one count script between them instead of one each. The count a request sees may
 * then be this much older than its own job (queue_full can let that many milliseconds' arrivals more
 * in); liveness is decided by heartbeats seconds long anyway.
 */
export const SHARED_READ_MS = 5;

/**
 * The API's side of the queue: checks that a worker serves the model and that its queue is not too
 * deep, records the completion (CompletionRecords), subscribes to its deltas, enqueues the job and waits
 * for a worker to start it.
 */
export class InferenceGateway {
  readonly #presence: WorkerPresence;
  readonly #queues: CompletionQueues;
  readonly #subscriber: DeltaSubscriber;
  readonly #records: CompletionRecords;
  readonly #followed: FollowedRecords;
  readonly #abandonment: AbandonmentWatch;
  readonly #undelivered: UndeliveredNotes;
  readonly #limits: GatewayLimits;
  readonly #reranker: WaitingJobReranker;
  readonly #waitingCounts: SharedReads<number>;
  readonly #liveness: SharedReads<boolean>;
  /** Jobs enqueued by this process that no worker started yet. */
  readonly #waiting = new Map<string, { job: CompletionJob; record: CompletionRecord }>();
  /** The relays of this process's own clients and the waits for their jobs' start, for interruptRelays. */
  readonly #interrupts = new RelayInterrupts();

  constructor(deps: {
    presence: WorkerPresence;
    queues: CompletionQueues;
    subscriber: DeltaSubscriber;
    records: CompletionRecords;
    /** The records of the completions this process's clients listen to (written again after a loss of Redis). */
    followed: FollowedRecords;
    abandonment: AbandonmentWatch;
    /** Where a reply given up on is noted with what its client was sent (none: not noted). */
    undelivered?: UndeliveredNotes;
    limits: GatewayLimits;
    /**
     * The job's account's jobs of its model running or waiting since before it (TenantCounters.ahead; null:
     * it waits no more): where a waiting job is reranked to.
     */
    aheadOf: (job: CompletionJob) => Promise<number | null>;
    /** How long a waiting count or liveness read is shared (SHARED_READ_MS; 0: every request reads its own). */
    sharedReadMs?: number;
  }) {
    this.#presence = deps.presence;
    this.#queues = deps.queues;
    this.#subscriber = deps.subscriber;
    this.#records = deps.records;
    this.#followed = deps.followed;
    this.#abandonment = deps.abandonment;
    this.#undelivered = deps.undelivered ?? { note: () => undefined };
    this.#limits = deps.limits;
    this.#reranker = new WaitingJobReranker({
      aheadOf: deps.aheadOf,
      changePriority: (job, priority) => this.#queues.changePriority(job.model, job.completionId, priority),
    });
    this.#waitingCounts = new SharedReads(deps.sharedReadMs ?? SHARED_READ_MS);
    this.#liveness = new SharedReads(deps.sharedReadMs ?? SHARED_READ_MS);
    // Redis came back (maybe without its data): what this process waits for and follows is written again.
    this.#subscriber.onReconnect(
      () => void recoverAfterRedisLoss({ waiting: this.#waiting, followed: this.#followed, queues: this.#queues, records: this.#records }),
    );
  }

  /**
   * Enqueues the job (with this process's reply channel) and its record, and resolves once a worker
   * started it. No live worker for the model, a queue deeper than queueMaxWaiting (both checked right
   * behind the enqueue; the job is then taken back off the queue), or the job not started within
   * `startTimeoutMs` (it is then removed from the queue) -> 503 model_unavailable.
   */
  async start(request: Omit<CompletionJob, "replyTo">, options: StartOptions): Promise<RunningJob> {
    this.assertConnected();
    await this.#subscriber.ready;
    const job: CompletionJob = { ...request, replyTo: this.#subscriber.replyTo };
    const connections = this.#subscriber.connections;
    // Silence after Redis went away and came back (or while it is away) is the outage's, not the model's.
    const silent = (internal: string) =>
      this.#subscriber.away || this.#subscriber.connections !== connections ? new ServiceUnavailableError("redis") : new InternalApiError(internal);
    const record: CompletionRecord = {
      completionId: job.completionId,
      accountId: job.accountId,
      model: job.model,
      endpoint: job.endpoint,
      created: job.created,
      reasoning: options.reasoning,
      replyTo: job.replyTo,
      ...(options.includeUsage ? { includeUsage: true } : {}),
    };
    // A batch line's feed keeps the recovery window (see FeedRecovery.lostAtOnce).
    const feed = this.#subscriber.open(job.completionId, { lostAtOnce: job.lane !== "batch" });
    this.#waiting.set(job.completionId, { job, record });
    const unfollow = this.#followed.hold(record);
    const interruptible = job.lane !== "batch" && job.endpoint !== "responses";
    // A Responses create's wait too (not a background one's: it waits through restarts): taken off the
    // queue at the shutdown, its hold released, like a chat's (it stayed queued, ran later and was charged
    // for a client told to retry).
    const waitInterruptible = job.lane !== "batch" && job.lane !== "background";
    // Set when this process stops waiting for the job's start (interruptRelays).
    const startInterrupted = { value: false };
    const endWait = (): void => {
      startInterrupted.value = true;
      feed.close();
    };
    const forgetWait = waitInterruptible ? this.#interrupts.addWait(endWait) : () => undefined;
    /** Set once the client went before the start (clientLeft) and the record was detached then; false once started. */
    let detachedEarly: boolean | null = null;
    try {
      // The enqueue goes out first: it starts the way to the first token. The liveness check and the
      // waiting count follow right behind it, once BullMQ has issued the job's command (at the end of
      // this turn, after the enqueue's synchronous steps and microtasks): Redis runs a connection's
      // commands in order, so it answers them after taking the job, and the count includes the job
      // unless a worker took it already (or the count is one shared with requests of the last few
      // milliseconds: SHARED_READ_MS); no wait for the enqueue's answer before they are sent. The job,
      // its record and the liveness check leave in one socket write (the connection is corked until the
      // end of the turn: one write instead of three, the bulk of their CPU cost; BullMQ issues the count
      // a few microtasks later, in a write of its own). Without a live worker, or behind too many
      // waiting jobs, the job is taken back off the queue; if a worker took it meanwhile, it runs. A
      // failed check (the job is already queued) is not a verdict: the start timeout decides.
      const checks = new Promise<{ live: Promise<boolean>; waiting: Promise<number>; ownCount: boolean }>((resolve) =>
        this.#queues.writeTogetherThisTurn(() => {
          let ownCount = false;
          const waiting = attempt(() => {
            const read = this.#waitingCounts.share(job.model, () => this.#queues.waitingCount(job.model));
            ownCount = read.own;
            return read.answer;
          });
          resolve({ live: attempt(() => this.#liveness.get(job.model, () => this.#presence.isLive(job.model))), waiting, ownCount });
        }),
      );
      const enqueuing = Promise.all([this.#queues.enqueue(job), this.#records.create(record)]);
      const [live, waiting, enqueued] = await Promise.allSettled([checks.then((c) => c.live), checks.then((c) => c.waiting), enqueuing]);
      if (enqueued.status === "rejected") {
        // No answer (Redis stalled or away): the enqueue may still run once Redis answers again, for a
        // client answered 503 now. The job is taken back behind it (never charged: a refused job). Not a
        // batch line's: its dispatcher runs the line again under the same id, and attaches to that job.
        if (job.lane !== "batch") {
          void retryWhileAway(() => this.#queues.cancel(job.model, job.completionId, "refused"), UNDO_RETRY);
        }
        throw isRedisUnavailable(enqueued.reason) ? new ServiceUnavailableError("redis", enqueued.reason) : enqueued.reason;
      }
      if (live.status === "fulfilled" && !live.value && (await this.#takeBack(job, record, UNAVAILABLE_END))) throw modelTemporarilyUnavailable(job.model);
      if (waiting.status === "fulfilled") {
        const full = waiting.value > this.#limits.queueMaxWaiting && (options.accountWaiting ?? 1) > 0;
        if (full && (await this.#takeBack(job, record, UNAVAILABLE_END))) {
          throw new ModelUnavailableError(
            `The model '${job.model}' has too many requests waiting. Retry after a short delay or use another model.`,
            "queue_full",
            {
              retryAfterSeconds: 5,
            },
          );
        }
      }
      // Queued and not refused: admission may go on (a stream opens its response), then hear its position.
      options.onQueued?.();
      options.clientLeft?.then(() => {
        unfollow();
        if (detachedEarly === null) detachedEarly = this.#abandonment.detached(record);
      });
      // Its place in line by the scheduling (lane and fair-share rank: the jobs a worker takes before it).
      // (Read while the job waits: the feed keeps the worker's messages meanwhile.) A count this request
      // read itself was sent behind its enqueue, so it includes the job: with at most one job waiting, that
      // one is this job (or none is left), it is first, and nothing more is read; a deep job is told that
      // count (an upper bound of its place). A count shared with an earlier request (read before this
      // job was queued) may not include it: the place is read (a job queued a moment after another one
      // of its account is second, not first).
      if (options.onPosition && waiting.status === "fulfilled") {
        const own = (await checks).ownCount;
        const position =
          job.priority === undefined || (own && waiting.value <= 1)
            ? waiting.value
            : await this.#queues.positionOf(job.model, job.priority, own ? waiting.value : undefined).catch(() => waiting.value);
        options.onPosition(Math.max(1, position));
      }
      await this.#awaitStart(feed, job, record, options.startTimeoutMs, silent, options.keepQueued === true, startInterrupted);
      // Started after this process began to stop: stopped, its client (sent nothing yet) told to retry.
      if (waitInterruptible && this.#interrupts.interrupting) {
        this.#interrupts.track(cancelLost(this.#queues, job, -1));
        throw new ServerShuttingDownError(false);
      }
    } catch (error) {
      feed.close();
      unfollow();
      throw error;
    } finally {
      this.#waiting.delete(job.completionId);
      forgetWait();
    }
    const leftBeforeStart = detachedEarly === true;
    detachedEarly = false;
    const idleMs = this.#limits.jobIdleTimeoutMs;
    const queues = this.#queues;
    let ended = false;
    let interrupted: ServerShuttingDownError | null = null; // this process stopped relaying it (interruptRelays)
    /** The last message handed on to the client (a stream's), -1 while none. */
    let relayedSeq = -1;
    /** The completion tokens of the deltas handed on (a stream's): -1 while none; NaN once one came without its count. */
    let relayedTokens = -1;
    const streamed = options.streamed === true;
    const undelivered = this.#undelivered;
    // Each message is looked at by this one handler (made once per job, not an async wrapper per message).
    const arrived = (message: DeltaMessage | undefined): DeltaMessage | Promise<never> => {
      if (message) {
        if (isTerminal(message)) ended = true;
        if (streamed) {
          relayedSeq = message.seq;
          if (message.type === "delta") relayedTokens = Math.max(relayedTokens, 0) + (message.tokens ?? Number.NaN);
        }
        return message;
      }
      if (interrupted) throw interrupted;
      if (feed.closed) throw new JobReleasedError();
      const lost = feed.lost;
      feed.close();
      // The request ends here for the platform's reason (messages lost with Redis: nothing more can
      // reach the client in order; or the job silent for the idle timeout): the job is stopped instead
      // of generating on for nobody, and its worker charges only what the client received. A batch
      // line's job runs on: its dispatcher follows it again or runs it again, and it is charged once, in
      // full, as the line's output will show (a partial charge would be the one kept).
      if (job.lane !== "batch" && lost) {
        void cancelLost(queues, job, relayedSeq);
        // Part of the reply lost with Redis (nobody can read it whole any more): should the worker have
        // recorded the whole usage before it hears this, the sweeper refunds the rest (a delta without its
        // count: what was sent is not known here, nothing is noted).
        if (!Number.isNaN(relayedTokens)) undelivered.note(job.completionId, relayedTokens);
      } else if (job.lane !== "batch" && job.lane !== "background") {
        // Only silent: its replay stream keeps what it writes, for a GET or an Idempotency-Key retry to
        // read whole. It is stopped as work nobody listens to (charged for what it generated, which that
        // read shows), not as a reply lost on its way (charged for what was sent, while more is readable).
        // Not a background response's: nobody waits on it, and its worker's death is no reason to stop it
        // (the job is continued once a worker of its model takes it over; its API process follows it again).
        void retryWhileAway(() => queues.cancel(job.model, job.completionId, "abandoned"), { forMs: 10_000, intervalMs: 250 });
      }
      if (lost) throw silent("Part of the reply was lost with Redis.");
      // Silent for the idle timeout: a Redis that stopped answering (frozen, its connections still open)
      // is the outage's (503 redis_unavailable), not the model's.
      return queues.answers().then((answers) => {
        throw answers ? silent("The model stopped answering.") : new ServiceUnavailableError("redis");
      });
    };
    const interrupt = (): void => {
      if (ended || feed.closed) return;
      interrupted = new ServerShuttingDownError(streamed);
      // A whole answer's client gets nothing now: its job is stopped and charges nothing (as a request
      // the API gave up on; its replay stream stays readable, so nothing is noted for a refund), unless
      // a client elsewhere follows it. A stream's job runs on for its client to resume.
      if (!streamed) this.#interrupts.track(this.#stopUnlessFollowed(job, record));
      feed.close();
    };
    const forgetRelay = interruptible ? this.#interrupts.addRelay(interrupt) : () => undefined;
    return {
      completionId: job.completionId,
      next: () => feed.next(idleMs).then(arrived),
      release: () => {
        forgetRelay();
        unfollow();
        if (feed.closed && ended) return;
        const early = !ended && !feed.closed;
        feed.close();
        // A batch line's job is not abandoned when its dispatcher lets go (an API process stopping): the
        // next dispatcher follows it, and only a cancel or the batch's expiry stops it.
        if (early && job.lane !== "batch" && !leftBeforeStart) this.#abandonment.detached(record);
      },
    };
  }

  /**
   * A whole answer's job whose relay this process ends at its shutdown: stopped, charging nothing (its
   * client got nothing), unless a client elsewhere follows it (an Idempotency-Key retry attached through
   * another process, a resume): it goes on for them, charged as they receive it, and this process's
   * client no longer counts (a streamed retry attached to it got 112 tokens, then a cancel that charged 0).
   */
  async #stopUnlessFollowed(job: CompletionJob, record: CompletionRecord): Promise<void> {
    // This process's own client still counts (the process beats until it exits).
    const listening = await this.#records.listeners(job.completionId).catch(() => 1);
    if (listening > 1) {
      this.#abandonment.detached(record);
      return;
    }
    await cancelLost(this.#queues, job, -1);
  }

  /**
   * Ends every relay of this process's own clients, and every wait for such a job's start, now (its
   * shutdown grace is nearly over) with ServerShuttingDownError: a stream's job runs on for its client to
   * resume elsewhere; any other is stopped, uncharged. Responses and batch lines are taken over instead.
   */
  interruptRelays(): number {
    return this.#interrupts.interruptAll();
  }

  /**
   * The stops interruptRelays started, done (or `boundMs` passed): the shutdown waits for them before it
   * closes Redis, or the stop of a whole answer's job, its client told "Retry it", never went out (the
   * job ran on and was charged in full, and the retry a second time).
   */
  interruptsSettled(boundMs: number): Promise<void> {
    return this.#interrupts.settled(boundMs);
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
    await this.#queues.cancel(model, completionId, "refused");
    // Its client was answered with the refusal: the completion never was one (a GET of its id is a 404).
    await this.#records.forget(completionId);
  }

  /**
   * Takes a job that no worker started back off the queue (true), and ends its record with `end`: a
   * client attached to it meanwhile (an Idempotency-Key retry, a resume through another process) is told
   * it ended, and a whole retry runs anew (it waited for a start that never came: for ever).
   */
  async #takeBack(job: CompletionJob, record: CompletionRecord, end: DeltaMessage): Promise<boolean> {
    if (!(await this.#queues.removeWaiting(job.model, job.completionId))) return false;
    await this.#records.endUnstarted(record, end).catch(() => undefined);
    return true;
  }

  async #awaitStart(
    feed: CompletionFeed,
    job: CompletionJob,
    record: CompletionRecord,
    startTimeoutMs: number,
    silent: (internal: string) => Error,
    keepQueued: boolean,
    interrupted: { value: boolean },
  ): Promise<void> {
    const first = await this.#reranker.firstMessage(feed, job, startTimeoutMs);
    if (interrupted.value) {
      // This process stops before the job started: taken off the queue (or, taken by a worker just now,
      // stopped as one whose client got nothing); the client is told to retry.
      if (!(await this.#takeBack(job, record, SHUTDOWN_END).catch(() => false))) {
        this.#interrupts.track(cancelLost(this.#queues, job, -1));
        throw new ServerShuttingDownError(false);
      }
      // It never ran: its budget hold goes at once (it stayed held until the sweeper's half hour).
      throw new ServerShuttingDownError(false, { neverRan: true });
    }
    if (first?.type === "started") return;
    if (first?.type === "error") throw jobErrorToApiError(first.error);
    if (first) throw new InternalApiError("The worker answered out of order.");
    if (feed.lost && job.lane !== "batch") {
      // Its start was lost with Redis (later messages show it runs): stopped, its client sent nothing.
      void cancelLost(this.#queues, job, -1);
      this.#undelivered.note(job.completionId, -1);
      throw new ServiceUnavailableError("redis");
    }
    // Not started yet (or this process stops listening): left in line, as asked (not after a loss of Redis's messages).
    if (keepQueued && !feed.lost) throw new StillQueuedError();
    if (await this.#takeBack(job, record, UNAVAILABLE_END)) throw modelTemporarilyUnavailable(job.model);
    // A worker took the job just now: its `started` is on the way.
    const late = await feed.next(this.#limits.jobIdleTimeoutMs);
    if (late?.type === "error") throw jobErrorToApiError(late.error);
    if (late?.type !== "started") throw silent("The worker did not start the job.");
  }
}
