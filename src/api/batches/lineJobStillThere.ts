import type { InferenceServices } from "../inference/inferenceServices.ts";

/**
 * Whether a line's job dispatched before can be followed: it ended (its replay stream holds its last
 * message) or BullMQ still has it queued or running. Otherwise its queue entry was lost (taken back
 * after a start timeout, or lost with Redis): the line enqueues it again under the same completion id
 * (a leftover entry BullMQ keeps as failed is removed first, or the new one would not be added).
 */
export async function lineJobStillThere(
  inference: Pick<InferenceServices, "records" | "queues">,
  model: string,
  completionId: string,
  removeLeftover = true,
): Promise<boolean> {
  const last = await inference.records.lastMessage(completionId);
  // Ended: followed only when its replay stream is whole (its first message kept: not cut by a loss of Redis).
  if (last?.type === "usage" && (await inference.records.firstMessage(completionId))?.seq === 0) return true;
  // Ended for the line's own reason (its 400, a cancel): followed, its replay answers it. Ended for the
  // platform's (internal, unavailable: e.g. stopped when its messages were lost with Redis): run again.
  if (last?.type === "error" && last.error.kind !== "internal" && last.error.kind !== "unavailable") return true;
  // Otherwise (nothing, a platform failure, or the end of a run whose start was lost with Redis): BullMQ decides.
  const job = await inference.queues.queue(model).getJob(completionId);
  if (!job) return false;
  const state = await job.getState();
  if (state !== "completed" && state !== "failed" && state !== "unknown") return true;
  if (removeLeftover) await job.remove().catch(() => undefined);
  return false;
}
