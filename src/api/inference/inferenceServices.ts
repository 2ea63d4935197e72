import type { Config } from "../../config/config.ts";
import { createPool, poolTimeouts, type Pool } from "../../db/createPool.ts";
import { CompletionQueues } from "./completionQueues.ts";
import type { Redis } from "../../redis/createRedis.ts";
import { DeltaSubscriber } from "./relay/deltaSubscriber.ts";
import { InferenceKeys } from "../../contracts/inferenceKeys.ts";
import { WorkerPresence } from "../../contracts/workerPresence.ts";
import type { ModelRegistry } from "../../models/modelRegistry.ts";
import { SpeculationPolicy } from "./admission/speculationPolicy.ts";
import { InferenceGateway } from "./run/inferenceGateway.ts";

/**
 * What the inference and models routes of one API process use: the registry, worker presence, the
 * per-model queues and the one shared delta subscriber. Created by the API role, closed when it stops.
 */
export type InferenceServices = {
  registry: ModelRegistry;
  presence: WorkerPresence;
  gateway: InferenceGateway;
  subscriber: DeltaSubscriber;
  /**
   * Connections for budget admission (holds), committing without waiting for the WAL flush: a hold is
   * short-lived bookkeeping that the sweeper and settle can do without, and the budget row it updates
   * is locked for the commit, so a flush per hold would serialise every admission of an account.
   */
  holdPool: Pool;
  /** When admission may enqueue the job before its hold is placed (speculative admission; per API process). */
  speculation: SpeculationPolicy;
  close(): Promise<void>;
};

export function createInferenceServices(deps: { config: Config; redis: Redis }, registry: ModelRegistry): InferenceServices {
  const { config, redis } = deps;
  const keys = new InferenceKeys(config.redisPrefix);
  const presence = new WorkerPresence(redis, keys);
  const queues = new CompletionQueues(redis, keys);
  const subscriber = new DeltaSubscriber(redis, keys);
  const holdPool = createPool(config.databaseUrl, 10, { synchronousCommit: false, timeouts: poolTimeouts(config, "api") });
  const gateway = new InferenceGateway({
    presence,
    queues,
    subscriber,
    timeouts: { jobStartTimeoutMs: config.jobStartTimeoutMs, jobIdleTimeoutMs: config.jobIdleTimeoutMs },
  });
  return {
    registry,
    presence,
    gateway,
    subscriber,
    holdPool,
    speculation: new SpeculationPolicy(),
    async close() {
      await subscriber.close();
      await queues.close();
      await holdPool.end();
    },
  };
}
