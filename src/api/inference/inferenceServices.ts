import type { Config } from "../../config/config.ts";
import { createPool, poolTimeouts, type Pool } from "../../db/createPool.ts";
import { CompletionQueues } from "./jobs/completionQueues.ts";
import type { Redis } from "../../redis/createRedis.ts";
import { DeltaSubscriber } from "./jobs/deltaSubscriber.ts";
import type { LocalReplyChannels } from "../../contracts/localReplyChannels.ts";
import { InferenceKeys } from "../../contracts/inferenceKeys.ts";
import { WorkerPresence } from "../../contracts/workerPresence.ts";
import type { ModelRegistry } from "../../models/modelRegistry.ts";
import { SpeculationPolicy } from "./admission/speculationPolicy.ts";
import { InferenceGateway } from "./jobs/inferenceGateway.ts";
import { UndeliveredReplyNotes } from "./jobs/undeliveredReplyNotes.ts";
import type { Logger } from "../../observability/logger.ts";
import { AbandonmentWatch } from "./jobs/abandonmentWatch.ts";
import { RelayInterrupts } from "./jobs/relayInterrupts.ts";
import { ApiPresence } from "../../contracts/apiPresence.ts";
import { ApiHeartbeat } from "./jobs/apiHeartbeat.ts";
import { FollowedRecords } from "./jobs/followedRecords.ts";
import { CompletionRecords } from "./jobs/completionRecords.ts";
import { IdempotencyKeys } from "./jobs/idempotencyKeys.ts";
import { ClientFollowers } from "./jobs/clientFollowers.ts";
import type { RunningJob } from "./jobs/runningJob.ts";
import { ReplayFollower } from "./jobs/replayFollower.ts";
import type { PlatformMetrics } from "../../observability/metrics.ts";
import { readQueueDepth } from "./jobs/queueDepth.ts";
import { JsonSchemaValidator } from "./endpoints/shared/jsonSchemas/jsonSchemaProblem.ts";
import { TenantCounters } from "../../contracts/tenantCounters.ts";
import { TenantAdmission } from "./admission/tenantAdmission.ts";
import { RESPONSE_LEASE_MS, ResponseKeeper } from "./endpoints/responses/responseKeeper.ts";
import { ResponseStore } from "./endpoints/responses/responseStore.ts";
import { CompletionJobs } from "./jobs/completionJobs.ts";
import { type Clock, systemClock } from "../../runtime/clock.ts";

/** How long a stopping API process waits for the stops of the jobs whose clients it told to retry (Redis away: not for ever). */
const INTERRUPT_STOPS_BOUND_MS = 3_000;

/**
 * What the inference and models routes of one API process use: the registry, worker presence, the
 * per-model queues and the one shared delta subscriber. Created by the API role, closed when it stops.
 */
export type InferenceServices = {
  registry: ModelRegistry;
  /** Starts a job (tenant limits, budget hold, queue) and hands back its stages: admitted, queued, started. */
  jobs: CompletionJobs;
  presence: WorkerPresence;
  gateway: InferenceGateway;
  subscriber: DeltaSubscriber;
  queues: CompletionQueues;
  /** The completions of the retention period: owner, model, listeners (reads, resumes, cancels). */
  records: CompletionRecords;
  /** The records of the completions this process's clients listen to (a resume holds its record while it reads). */
  followedRecords: FollowedRecords;
  /** Stops completions nobody listens to any more, after the grace period. */
  abandonment: AbandonmentWatch;
  idempotency: IdempotencyKeys;
  /** A completion's messages from its replay stream, after a sequence number, then live (resume, attach). */
  follow(completionId: string, afterSeq: number, options?: FollowOptions): ReplayFollower;
  /** follow() for a client's request, counted against its account's open follows (ClientFollowers: 429 past the limit). */
  followForClient(accountId: string, completionId: string, afterSeq: number, options?: FollowOptions): RunningJob;
  /**
   * Ends every reply this process relays to its clients now, with ServerShuttingDownError (its shutdown
   * grace is nearly over): a stream's client is told to resume it elsewhere. Returns how many.
   */
  interruptRelays(): number;
  /**
   * Responses creates this process answers (their runs are not relays of the gateway's): each one's
   * interruption, called by interruptRelays; returns what forgets it.
   */
  responseCreates: Pick<RelayInterrupts, "addRelay" | "interrupting" | "track">;
  /** The limits of this API process's inference requests. */
  limits: InferenceLimits;
  /**
   * Connections for budget admission (holds), committing without waiting for the WAL flush: a hold is
   * short-lived bookkeeping that the sweeper and settle can do without, and the budget row it updates
   * is locked for the commit, so a flush per hold would serialise every admission of an account.
   */
  holdPool: Pool;
  /** When admission may enqueue the job before its hold is placed (speculative admission; per API process). */
  speculation: SpeculationPolicy;
  /** Validates the JSON Schemas of requests (tool parameters, response formats). */
  schemas: JsonSchemaValidator;
  /** Rate limits, queue share and fair-share rank of each request (before its budget hold). */
  tenants: TenantAdmission;
  /** The Responses API's stored responses, and the ones this process follows to their end. */
  responses: ResponseKeeper;
  close(): Promise<void>;
};

/** `started`: the follower also hands on the job's `started` message (it tells when a queued job starts). */
export type FollowOptions = {
  started?: boolean;
  /** Every message must follow the one before it (a batch line's): a gap (messages lost with Redis) ends the read with a 503. */
  gapless?: boolean;
};

export type InferenceLimits = {
  jobStartTimeoutMs: number;
  jobStartTimeoutStreamMs: number;
  jobIdleTimeoutMs: number;
  sseKeepAliveMs: number;
  /** A new stream's headers wait this long after admission for its first chunk or refusal (Config.streamHeadersHoldMs). */
  streamHeadersHoldMs: number;
};

export function createInferenceServices(
  deps: {
    config: Config;
    redis: Redis;
    logger: Logger;
    metrics: PlatformMetrics;
    clock?: Clock;
    /** The reply channels of this process (RoleContext): a worker role of this process hands this API its replies directly. */
    localReplies?: LocalReplyChannels;
  },
  registry: ModelRegistry,
): InferenceServices {
  const { config, redis, logger, metrics } = deps;
  const keys = new InferenceKeys(config.redisPrefix);
  const presence = new WorkerPresence(redis, keys);
  const queues = new CompletionQueues(redis, keys);
  const subscriber = new DeltaSubscriber(redis, keys, deps.localReplies ? { local: deps.localReplies } : {});
  const holdPool = createPool(config.databaseUrl, 10, {
    synchronousCommit: false,
    timeouts: poolTimeouts(config, "api"),
    onConnectionLost: (error) => logger.warn("postgres connection lost", { pool: "api-holds", error }),
  });
  const counters = new TenantCounters(redis, config.redisPrefix);
  const unwatch = [metrics.sources.addPool("api-holds", holdPool), metrics.sources.addQueueDepth(() => readQueueDepth(queues, registry, counters))];
  const tenants = new TenantAdmission({
    counters,
    settings: config.tenants,
    queueMaxWaiting: config.queueMaxWaiting,
    onRefusal: (reason) => metrics.admission.refusals.inc({ reason }),
  });
  const apiPresence = new ApiPresence(redis, keys);
  const heartbeat = new ApiHeartbeat({ presence: apiPresence, process: subscriber.replyTo, logger });
  heartbeat.start();
  const records = new CompletionRecords(redis, keys, config.completionRetentionSeconds, { process: subscriber.replyTo, presence: apiPresence });
  const abandonment = new AbandonmentWatch({
    records,
    queues,
    graceMs: config.completionAbandonGraceMs,
    lastMessage: (completionId) => records.lastMessage(completionId),
    logger,
  });
  const followedRecords = new FollowedRecords();
  const gateway = new InferenceGateway({
    presence,
    queues,
    subscriber,
    records,
    followed: followedRecords,
    abandonment,
    undelivered: new UndeliveredReplyNotes(holdPool, logger),
    limits: { jobIdleTimeoutMs: config.jobIdleTimeoutMs, queueMaxWaiting: config.queueMaxWaiting },
    aheadOf: (job) => counters.ahead(job),
  });
  const speculation = new SpeculationPolicy();
  const limits: InferenceLimits = {
    jobStartTimeoutMs: config.jobStartTimeoutMs,
    jobStartTimeoutStreamMs: config.jobStartTimeoutStreamMs,
    jobIdleTimeoutMs: config.jobIdleTimeoutMs,
    sseKeepAliveMs: config.sseKeepAliveMs,
    streamHeadersHoldMs: config.streamHeadersHoldMs,
  };
  const jobs = new CompletionJobs({
    gateway,
    tenants,
    admission: { pool: holdPool, clock: deps.clock ?? systemClock, policy: speculation, metrics },
    metrics,
    limits,
  });
  const follow = (completionId: string, afterSeq: number, options: FollowOptions = {}) =>
    new ReplayFollower(redis, keys, completionId, { afterSeq, idleTimeoutMs: config.jobIdleTimeoutMs, ...options });
  const clientFollowers = new ClientFollowers(config.clientFollowsPerAccount);
  const responseCreates = new RelayInterrupts();
  const followForClient = (accountId: string, completionId: string, afterSeq: number, options: FollowOptions = {}) =>
    clientFollowers.take(accountId, () => follow(completionId, afterSeq, options));
  const responses = new ResponseKeeper({
    store: new ResponseStore(holdPool, { retentionMs: config.responsesRetentionDays * 86_400_000, leaseMs: RESPONSE_LEASE_MS }),
    records,
    follow,
    logger,
  });
  responses.start();
  return {
    registry,
    jobs,
    responses,
    presence,
    gateway,
    subscriber,
    queues,
    records,
    followedRecords,
    abandonment,
    idempotency: new IdempotencyKeys(redis, keys, config.idempotencyTtlSeconds),
    schemas: new JsonSchemaValidator(),
    tenants,
    follow,
    followForClient,
    interruptRelays: () => gateway.interruptRelays() + clientFollowers.interruptAll() + responseCreates.interruptAll(),
    responseCreates,
    limits,
    holdPool,
    speculation,
    async close() {
      // The stops of jobs whose clients this process told to retry (its shutdown) go out first.
      await Promise.all([gateway.interruptsSettled(INTERRUPT_STOPS_BOUND_MS), responseCreates.settled(INTERRUPT_STOPS_BOUND_MS)]);
      for (const stop of unwatch) stop();
      abandonment.close();
      heartbeat.stop();
      // The feeds close first: the responses followed here are then let go without counting as abandoned
      // (another API process's recovery pass follows them on).
      await subscriber.close();
      await responses.close();
      await queues.close();
      await holdPool.end();
    },
  };
}
