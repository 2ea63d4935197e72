import type { ModelRegistry } from "../../models/modelRegistry.ts";
import type { QueueDepth } from "../../observability/scrapeSources.ts";
import type { CompletionQueues } from "./completionQueues.ts";

/** The BullMQ states counted in the inference_queue_jobs gauge. */
const STATES = ["waiting", "active", "delayed", "prioritized", "failed"] as const;

/**
 * Each registry model's queue by job state (BullMQ's public Queue.getJobCounts), read on a metrics
 * scrape. Nothing while the Redis connection is down: the scrape leaves the gauge out rather than wait.
 */
export async function readQueueDepth(queues: CompletionQueues, registry: ModelRegistry): Promise<QueueDepth[]> {
  if (queues.away) return [];
  return Promise.all(registry.all().map(async (model) => ({ model: model.id, counts: await queues.queue(model.id).getJobCounts(...STATES) })));
}
