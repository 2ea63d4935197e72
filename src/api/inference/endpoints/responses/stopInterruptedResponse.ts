import { cancelLost } from "../../jobs/cancelLost.ts";
import { failedUncharged } from "../../jobs/failedUncharged.ts";
import type { InferenceServices } from "../shared/requireInference.ts";

/**
 * A response answered whole whose API process stops before its end (its shutdown grace nearly over): its
 * client is answered 503 `server_shutting_down`, "Retry it", which the SDKs do. Its job is stopped,
 * charging nothing (the client got nothing; as a chat completion's), unless a client elsewhere follows it
 * (a stream read of it through another process): it goes on for them. Left running, the SDK's retry
 * ran and charged it a second time.
 */
export async function stopInterruptedResponse(inference: InferenceServices, model: string, id: string): Promise<void> {
  // This process's own client still counts (the process beats until it exits).
  const listening = await inference.records.listeners(id).catch(() => 1);
  if (listening > 1) return;
  await cancelLost(inference.queues, { model, completionId: id }, -1);
}

/**
 * The job of a response ended failed for a passing reason and charged nothing (stopped by its API
 * process's shutdown, the model unavailable, an engine failure): a retry with its Idempotency-Key runs
 * anew, as the 503 or 500 the first request got asked for, not answered that failure again.
 */
export async function endedUncharged(inference: InferenceServices, id: string): Promise<boolean> {
  const last = await inference.records.lastMessage(id).catch(() => undefined);
  return last !== undefined && failedUncharged(last);
}
