import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import { ConfigError, type Config } from "../src/config/config.ts";
import type { LocalReplyChannels } from "../src/contracts/localReplyChannels.ts";
import { createPool, poolTimeouts, shortStatements, type Pool } from "../src/db/createPool.ts";
import { createRedis } from "../src/redis/createRedis.ts";
import { InferenceKeys } from "../src/contracts/inferenceKeys.ts";
import { WorkerPresence } from "../src/contracts/workerPresence.ts";
import { publishPriceTable } from "../src/ledger/pricing/priceTable.ts";
import { systemClock } from "../src/runtime/clock.ts";
import { loadModelRegistry } from "../src/models/loadModelRegistry.ts";
import { MODEL_CAPABILITIES } from "../src/models/modelCapabilities.ts";
import type { RegisteredModel } from "../src/models/modelRegistry.ts";
import type { Logger } from "../src/observability/logger.ts";
import type { PlatformMetrics } from "../src/observability/metrics.ts";
import { meteredEngine } from "./engines/meteredEngine.ts";
import { CompletionJobRunner } from "./completion/completionJobRunner.ts";
import { TenantCounters } from "../src/contracts/tenantCounters.ts";
import { CompletionWorker } from "./completion/completionWorker.ts";
import { CoalescingWindow } from "./completion/coalescingWindow.ts";
import { DeltaPublisher } from "./completion/deltaPublisher.ts";
import { JobCancellations } from "./completion/jobCancellations.ts";
import { AbandonedJobWatch } from "./completion/abandonedJobWatch.ts";
import { ApiPresence } from "../src/contracts/apiPresence.ts";
import { ReplayFence } from "./completion/replayFence.ts";
import { ReplayReader } from "./completion/replayReader.ts";
import { TurnWriter } from "./completion/turnWriter.ts";
import { UsageRecorder } from "./completion/usageRecorder.ts";
import { WorkerHeartbeat } from "./completion/workerHeartbeat.ts";
import { createEngine } from "./engines/createEngine.ts";
import type { Engine } from "./engines/engine.ts";
import { EngineSet } from "./engines/engineSet.ts";

/** The statement timeout of the usage recorder's pools: its statements are short (an append, an update). */
const USAGE_STATEMENT_MS = 5000;

/** RoleContext, with `localReplies` optional: without it, every reply is published (as to an API in another process). */
export type WorkerContext = { config: Config; pool: Pool; logger: Logger; metrics: PlatformMetrics; localReplies?: LocalReplyChannels };

export type WorkerOptions = {
  /** Replaces the engine adapters (tests wrap the real engine to make it fail). */
  wrapEngine?: (model: RegisteredModel, engine: Engine) => Engine;
  workerId?: string;
};

export type RunningWorker = { workerId: string; modelIds: string[]; stop(): Promise<void> };

/**
 * The worker role: loads the registry, loads each engine it serves once (WORKER_MODELS, default all),
 * consumes each model's queue, and heartbeats the models into Redis once it is ready to take jobs.
 * stop(): leave first (so the API answers 503 at once), then finish the running jobs, then unload.
 */
export async function startWorker({ config, pool, logger, metrics, localReplies }: WorkerContext, options: WorkerOptions = {}): Promise<RunningWorker> {
  const loaded = await loadModelRegistry(config.modelsConfigPath);
  // Charges name the published price table version they were computed at (docs/audit.md).
  const registry = loaded.withPriceTableVersion(await publishPriceTable(pool, loaded.priceTableVersion, loaded.prices(), systemClock.now()));
  const wanted = config.workerModels;
  const unknown = (wanted ?? []).filter((id) => !registry.get(id));
  if (unknown.length) throw new ConfigError(`start-up failed: WORKER_MODELS names models the registry does not have: ${unknown.join(", ")}.`);
  const models = registry.all().filter((m) => !wanted || wanted.includes(m.id));
  const workerId = options.workerId ?? `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`;
  const keys = new InferenceKeys(config.redisPrefix);
  const redis = createRedis(config.redis, { kind: "worker", timeouts: config.redisTimeouts });
  const tenantCounters = new TenantCounters(redis, config.redisPrefix);
  const deltaRedis = createRedis(config.redis, { kind: "worker", timeouts: config.redisTimeouts });
  const unwatch = [metrics.sources.addRedis("worker", redis), metrics.sources.addRedis("worker-deltas", deltaRedis)];
  const window = new CoalescingWindow(config.deltaCoalesceMs);
  // The replies of an API role of this process are handed to it directly, once appended to their replay streams.
  const writer = new TurnWriter(deltaRedis, localReplies ?? null);
  const engines = new EngineSet((model) => createEngine(model, config));
  // Usage is recorded on pools of its own whose statements are all short (USAGE_STATEMENT_MS): a silent
  // PostgreSQL costs an attempt seconds, not the background pool's 35 s, so usage is recorded within
  // seconds of its return. The budget half of each settle commits without waiting for the WAL flush
  // (see recordUsage).
  const usageTimeouts = shortStatements(poolTimeouts(config, "background"), USAGE_STATEMENT_MS);
  const usagePool = createPool(config.databaseUrl, 10, {
    timeouts: usageTimeouts,
    onConnectionLost: (error) => logger.warn("postgres connection lost", { pool: "worker-usage", error }),
  });
  const foldPool = createPool(config.databaseUrl, 10, {
    synchronousCommit: false,
    timeouts: usageTimeouts,
    onConnectionLost: (error) => logger.warn("postgres connection lost", { pool: "worker-folds", error }),
  });
  unwatch.push(metrics.sources.addPool("worker-usage", usagePool), metrics.sources.addPool("worker-folds", foldPool));
  const usage = new UsageRecorder(usagePool, {
    foldPool,
    onRetry: (error, attempt) => {
      if (attempt % 20 === 0) logger.warn("usage not recorded yet, retrying", { attempt, error: error as Error });
    },
  });
  const cancellations = new JobCancellations(config.redis, keys, { timeouts: config.redisTimeouts, commands: redis });
  const abandonedJobs = new AbandonedJobWatch({
    redis,
    keys,
    presence: new ApiPresence(redis, keys),
    graceMs: config.completionAbandonGraceMs,
    cancel: (completionId) => cancellations.cancel(completionId, "abandoned"),
    logger,
  });
  const replay = new ReplayReader(redis, keys);
  const replayFence = new ReplayFence(redis, keys, { ttlSeconds: config.completionRetentionSeconds, maxLen: config.deltaReplayMaxLen });
  const workers: CompletionWorker[] = [];
  // Connected again (Redis restarted, maybe without its data): the jobs running here are counted again.
  const restoreTenants = () => {
    for (const worker of workers) worker.restoreTenantEntries();
  };
  redis.on("ready", restoreTenants);
  unwatch.push(() => redis.off("ready", restoreTenants));
  const heartbeat = new WorkerHeartbeat({
    presence: new WorkerPresence(redis, keys),
    workerId,
    modelIds: models.map((m) => m.id),
    intervalMs: config.workerHeartbeatMs,
    logger,
  });
  try {
    for (const model of models) {
      const loaded = await engines.engineFor(model);
      const engine = meteredEngine(options.wrapEngine ? options.wrapEngine(model, loaded) : loaded, model.id, metrics.inference, model.context_length);
      warnOnCapabilityMismatch(model, engine, logger);
      const runner = new CompletionJobRunner({
        model,
        engine,
        usage,
        publisherFor: (job, firstSeq, fence) =>
          new DeltaPublisher(keys, job, {
            window,
            writer,
            replayTtlSeconds: config.completionRetentionSeconds,
            replayMaxLen: config.deltaReplayMaxLen,
            firstSeq,
            ...fence,
          }),
        fence: replayFence,
        replay,
        now: () => new Date(),
        logger: logger.child({ model: model.id }),
        cancellations,
        abandonedJobs,
        traceMessageContent: config.traceMessageContent,
        usageWaitMs: config.usageWaitMs,
      });
      const worker = new CompletionWorker({
        modelId: model.id,
        redis,
        keys,
        concurrency: EngineSet.concurrencyOf(model, loaded),
        runner,
        replay,
        logger,
        lockDurationMs: config.workerLockMs,
        stalledIntervalMs: config.workerStalledCheckMs,
        metrics: metrics.jobs,
        tenants: { counters: tenantCounters, inFlightTtlMs: config.tenants.inFlightTtlMs },
      });
      workers.push(worker);
      await worker.start();
    }
    await cancellations.ready;
    await heartbeat.start();
  } catch (error) {
    for (const stop of unwatch) stop();
    abandonedJobs.stop();
    cancellations.close();
    await Promise.all(workers.map((w) => w.close()));
    await engines.close();
    redis.disconnect();
    deltaRedis.disconnect();
    await Promise.all([usagePool.end(), foldPool.end()]);
    throw error;
  }
  logger.info("worker ready", { workerId, models: models.map((m) => m.id) });
  return {
    workerId,
    modelIds: models.map((m) => m.id),
    async stop() {
      await heartbeat.stop();
      await Promise.all(workers.map((w) => w.close()));
      await engines.close();
      for (const stop of unwatch) stop();
      abandonedJobs.stop();
      cancellations.close();
      redis.disconnect();
      deltaRedis.disconnect();
      await Promise.all([usagePool.end(), foldPool.end()]);
    },
  };
}

function warnOnCapabilityMismatch(model: RegisteredModel, engine: Engine, logger: Logger): void {
  const has = engine.capabilities();
  const c = model.capabilities;
  const missing = MODEL_CAPABILITIES.filter((name) => c[name] && !has[name]);
  if (missing.length) logger.warn("the registry declares capabilities the engine does not have", { model: model.id, missing });
}
