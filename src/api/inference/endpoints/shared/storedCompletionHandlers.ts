import type { Context } from "koa";
import type { Endpoint } from "../../../../contracts/completionJob.ts";
import { isTerminal } from "../../../../contracts/deltaMessage.ts";
import type { AppDeps } from "../../../appDeps.ts";
import { NotFoundError } from "../../../http/errors.ts";
import { validated } from "../../../http/validate.ts";
import type { CompletionRecord } from "../../jobs/completionRecords.ts";
import type { InferenceServices } from "./requireInference.ts";
import { principalOf } from "../../../auth/principalOf.ts";
import { requireInference } from "./requireInference.ts";
import { type ResponseShape, serveExistingCompletion } from "./serveCompletion.ts";
import { resumePoint, StoredCompletionQuerySchema } from "./storedCompletionQuerySchema.ts";

/** The caller's completion of this endpoint, or 404 (another account's completion does not exist for it). */
async function ownCompletion(inference: InferenceServices, ctx: Context, endpoint: Endpoint): Promise<CompletionRecord> {
  const completionId = String(ctx.params.completionId ?? "");
  const record = completionId ? await inference.records.find(completionId) : null;
  if (!record || record.accountId !== principalOf(ctx).accountId || record.endpoint !== endpoint) {
    throw new NotFoundError(`No completion with id '${completionId}' (completions are kept for a limited time).`, {
      param: "completion_id",
      code: "completion_not_found",
    });
  }
  return record;
}

/**
 * GET /v1/chat/completions/{id} (and /v1/completions/{id}): the stored completion, in the same shape as
 * the POST's answer (waiting for its end if it still runs); with `stream=true`, its events after
 * `starting_after` / Last-Event-ID and then the rest live, each with its `id:`.
 */
export function getStoredCompletion(deps: AppDeps, endpoint: Endpoint, shape: ResponseShape) {
  return async function getCompletion(ctx: Context): Promise<void> {
    const inference = requireInference(deps);
    const query = validated(ctx, StoredCompletionQuerySchema);
    const record = await ownCompletion(inference, ctx, endpoint);
    const stream = query.stream === true;
    const lastEventId = ctx.get("last-event-id");
    // A resume point applies to a stream only: a non-streamed GET answers the whole completion.
    const afterSeq = !stream ? -1 : resumePoint(query.starting_after, lastEventId);
    await serveExistingCompletion(inference, ctx, record, { afterSeq, stream, includeUsage: query.include_usage ?? record.includeUsage ?? false, shape });
  };
}

/**
 * POST /v1/chat/completions/{id}/cancel (and /v1/completions/{id}/cancel): stops the completion at once.
 * A job still waiting for a worker is taken off the queue and charged nothing; a running one is aborted
 * by its worker, which charges the tokens generated so far. Its stream ends with an error event of code
 * `completion_cancelled` and `[DONE]` (after the usage chunk, with include_usage). Answers `status`:
 * `cancelled` (it never ran, or was cancelled already), `cancelling` (its worker is stopping it) or
 * `completed` (it had already ended otherwise).
 */
export function cancelStoredCompletion(deps: AppDeps, endpoint: Endpoint) {
  return async function cancelCompletion(ctx: Context): Promise<void> {
    const inference = requireInference(deps);
    const record = await ownCompletion(inference, ctx, endpoint);
    const object = endpoint === "completions" ? "text_completion.cancellation" : "chat.completion.cancellation";
    const last = await inference.records.lastMessage(record.completionId);
    // Already ended: `cancelled` when a cancel (or nobody listening) ended it, else `completed`.
    let status: "cancelled" | "cancelling" | "completed" = last?.type === "error" && last.error.kind === "cancelled" ? "cancelled" : "completed";
    if (!last || !isTerminal(last)) {
      const removed = await inference.queues.cancel(record.model, record.completionId, "user");
      // BullMQ answers the removal of a job that finished meanwhile (and left the queue) as done too:
      // one that ended whole since the read above is answered as it ended, and nothing is appended to it.
      const ended = removed ? await inference.records.lastMessage(record.completionId) : undefined;
      if (ended && isTerminal(ended)) {
        status = ended.type === "error" && ended.error.kind === "cancelled" ? "cancelled" : "completed";
      } else if (removed) {
        await inference.records.endUnstarted(record, {
          seq: 0,
          type: "error",
          error: { kind: "cancelled", message: "The completion was cancelled by its owner before it started.", param: null },
        });
        status = "cancelled";
      } else status = "cancelling";
    }
    ctx.set("cache-control", "no-store");
    ctx.body = { id: record.completionId, object, status };
  };
}
