import type { Context } from "koa";
import type { AppDeps } from "../../../appDeps.ts";
import { InvalidRequestError } from "../../../http/errors.ts";
import { requireInference } from "../shared/requireInference.ts";
import { ownResponse } from "./responseHandlers.ts";
import { TERMINAL_STATUSES } from "./responseObject.ts";
import { currentObject, stoppedObject } from "./responseStreams.ts";
import { stopResponseJob as stopJob } from "./stopResponseJob.ts";

/**
 * POST /v1/responses/{id}/cancel: stops a response that has not ended (taken off the queue, or aborted
 * by its worker, which charges what it generated). Idempotent: a cancelled response stays cancelled.
 */
export function cancelResponseHandler(deps: AppDeps) {
  return async function cancelResponse(ctx: Context): Promise<void> {
    const inference = requireInference(deps);
    const stored = await ownResponse(inference, ctx);
    const status = stored.state.status;
    if (TERMINAL_STATUSES.has(status) && status !== "cancelled") {
      throw new InvalidRequestError(`Cannot cancel a response with status '${status}'.`, { param: "response_id", code: "invalid_value" });
    }
    ctx.set("cache-control", "no-store");
    if (status !== "cancelled") {
      if (await inference.responses.store.cancel(stored.accountId, stored.id, deps.clock.now())) {
        // Answered once its job has stopped: the output so far and the usage charged, as it stays (OpenAI
        // answers the final object); or, when the job ended whole before the cancel reached it, as it ended.
        if (!(await stopJob(inference, stored))) {
          const stopped = await stoppedObject(inference, stored);
          ctx.body = TERMINAL_STATUSES.has(stopped.status) ? stopped : { ...stopped, status: "cancelled" };
          return;
        }
      } else {
        // It ended meanwhile.
        const ended = await inference.responses.store.find(stored.accountId, stored.id);
        if (ended && TERMINAL_STATUSES.has(ended.state.status) && ended.state.status !== "cancelled") {
          throw new InvalidRequestError(`Cannot cancel a response with status '${ended.state.status}'.`, { param: "response_id", code: "invalid_value" });
        }
      }
    }
    const now = (await inference.responses.store.find(stored.accountId, stored.id)) ?? stored;
    const object = await currentObject(inference, { ...now, state: { ...now.state, status: "cancelled" } });
    ctx.body = { ...object, status: "cancelled" };
  };
}
