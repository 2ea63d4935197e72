import { isTerminal } from "../../../../contracts/deltaMessage.ts";
import type { InferenceServices } from "../shared/requireInference.ts";
import type { StoredResponse } from "./responseStore.ts";

/** Takes the response's job off the queue (true: it never ran), or has its worker abort it (false). */
export async function stopResponseJob(inference: InferenceServices, stored: StoredResponse): Promise<boolean> {
  const removed = await inference.queues.cancel(stored.model, stored.id, "user");
  if (!removed) return false;
  // BullMQ answers the removal of a job that finished meanwhile (and left the queue) as done too: one
  // that ended whole is not "removed before it started" (the cancel then answers it as it ended).
  const last = await inference.records.lastMessage(stored.id).catch(() => undefined);
  if (last && isTerminal(last)) return false;
  const record = await inference.records.find(stored.id);
  if (record) {
    await inference.records.endUnstarted(record, {
      seq: 0,
      type: "error",
      error: { kind: "cancelled", message: "The response was cancelled by its owner before it started.", param: null },
    });
  }
  return true;
}
