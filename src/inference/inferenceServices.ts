import type { Config } from "../config.ts";
import { CompletionQueues } from "../messaging/completionQueues.ts";
import type { Redis } from "../messaging/createRedis.ts";
import { DeltaSubscriber } from "../messaging/deltaSubscriber.ts";
import { InferenceKeys } from "../messaging/inferenceKeys.ts";
import { WorkerPresence } from "../messaging/workerPresence.ts";
import type { ModelRegistry } from "../models/registry/modelRegistry.ts";
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
  close(): Promise<void>;
};

export function createInferenceServices(deps: { config: Config; redis: Redis }, registry: ModelRegistry): InferenceServices {
  const { config, redis } = deps;
  const keys = new InferenceKeys(config.redisPrefix);
  const presence = new WorkerPresence(redis, keys);
  const queues = new CompletionQueues(redis, keys);
  const subscriber = new DeltaSubscriber(config.redisUrl, redis, keys);
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
    async close() {
      await subscriber.close();
      await queues.close();
    },
  };
}
