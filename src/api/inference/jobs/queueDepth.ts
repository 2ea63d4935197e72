import type { ModelRegistry } from "../../../models/modelRegistry.ts";
import type { QueueDepth } from "../../../observability/scrapeSources.ts";
import type { CompletionQueues } from "./completionQueues.ts";
import { LANES } from "../../../contracts/lanes.ts";
import type { TenantCounters } from "../../../contracts/tenantCounters.ts";

/** The BullMQ states counted in the inference_queue_jobs gauge. */
const STATES = ["waiting", "active", "delayed", "prioritized", "failed"] as const;

/**
 * Each registry model's queue by job state (BullMQ's public Queue.getJobCounts) and its waiting jobs by
 * lane (TenantCounters' lane sets), read on a metrics
 * scrape. Nothing while the Redis connection is down: the scrape leaves the gauge out rather than wait.
 */
export async function readQueueDepth(queues: CompletionQueues, registry: ModelRegistry, counters?: TenantCounters): Promise<QueueDepth[]> {
  if (queues.away) return [];
  return Promise.all(
    registry.all().map(async (model) => {
      const [counts, lanes] = await Promise.all([
        queues.queue(model.id).getJobCounts(...STATES),
        counters ? Promise.all(LANES.map(async (lane) => [lane, await counters.laneWaiting(model.id, lane)] as const)) : Promise.resolve([]),
      ]);
      return { model: model.id, counts, ...(counters ? { lanes: Object.fromEntries(lanes) } : {}) };
    }),
  );
}
