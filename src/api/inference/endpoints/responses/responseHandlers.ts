import type { Context } from "koa";
import { jobErrorToApiError } from "../../jobs/jobErrorToApiError.ts";
import { chargedEarlier } from "../../jobs/chargedEarlier.ts";
import type { AppDeps } from "../../../appDeps.ts";
import { toApiError } from "../../../http/errorHandler.ts";
import { ApiError, ConflictError, InternalApiError, InvalidRequestError, NotFoundError, ServerShuttingDownError } from "../../../http/errors.ts";
import { validated } from "../../../http/validate.ts";
import { resumePoint } from "../shared/storedCompletionQuerySchema.ts";
import { discardResponseReplay, UNSTORED_REPLAY_KEPT_S } from "./responseReplayRetention.ts";
import { stopResponseJob as stopJob } from "./stopResponseJob.ts";
import { checkJsonValue } from "../../../http/jsonValueCheck.ts";
import { parseIdempotencyKey, requestHash } from "../../jobs/idempotencyKeys.ts";
import type { InferenceServices } from "../shared/requireInference.ts";
import { principalOf } from "../../../auth/principalOf.ts";
import { requireInference } from "../shared/requireInference.ts";
import { resolveModel } from "../shared/resolveModel.ts";
import { COMPLETION_ID_HEADER } from "../shared/serveCompletion.ts";
import { SseResponse } from "../../streaming/sseResponse.ts";
import { StillQueuedError } from "../../jobs/stillQueuedError.ts";
import { checkCallOutputsAnswered, newItemId, referencedItemIds, toStoredItems } from "./responseItems.ts";
import { type ResponseHead, TERMINAL_STATUSES } from "./responseObject.ts";
import { InputItemsQuerySchema, ResponseRequestSchema, RetrieveResponseQuerySchema } from "./responseRequestSchema.ts";
import type { StoredResponse } from "./responseStore.ts";
import { currentObject, endedObject, endInterruptedStream, endSilentStream, eventWriter, interruptionOf, streamStoredResponse } from "./responseStreams.ts";
import { previousContext } from "./previousContext.ts";
import { endedUncharged, stopInterruptedResponse } from "./stopInterruptedResponse.ts";
import { responseSettings, toResponseChatRequest } from "./toResponseChatRequest.ts";

/** The caller's stored response, or 404 (another account's response does not exist for it). */
export async function ownResponse(inference: InferenceServices, ctx: Context): Promise<StoredResponse> {
  const id = String(ctx.params.responseId ?? "");
  const stored = await inference.responses.store.find(principalOf(ctx).accountId, id);
  if (!stored) throw new NotFoundError(`Response with id '${id}' not found.`, { param: "response_id", code: "not_found" });
  return stored;
}

/**
 * A stored response keeps its request's strings in jsonb, which cannot hold U+0000 or an unpaired
 * surrogate: such a request is a 400 naming the place, before anything is claimed or stored.
 */
function refuseUnstorable(body: unknown): void {
  const problem = checkJsonValue(body);
  if (!problem) return;
  // The body itself (a key of its own members): no param, as for any problem of the whole body.
  const where = problem.path ? `Invalid '${problem.path}'` : "Invalid request body";
  throw new InvalidRequestError(`${where}: ${problem.message} (a stored response keeps it; send store: false to keep nothing).`, {
    param: problem.path || null,
    code: "invalid_value",
  });
}

const CLAIM_POLL_MS = 50;
/** A wait that never ends (a background create is not interrupted). */
const NEVER = new Promise<void>(() => undefined);

/**
 * The stored response of the first request with the same Idempotency-Key (and body, so the same `store`):
 * waited for while that request is still starting (claimed, its row not yet written; its job admitted,
 * for one that stores nothing), at most jobStartTimeoutMs, as chat waits for the first request's record.
 * Null once the first request failed and gave its claim back (this one then runs as a new request), or
 * a `store: false` one's job was stopped uncharged (its claim is given back here).
 *
 * A 409 with `x-should-retry: false` when retrying with this key cannot be answered: a `store: false`
 * first request whose job was admitted keeps its claim for the key's lifetime (given back only when its
 * job fails to start: refused, where the same body fails again, or a start timeout, long after the SDKs'
 * retries) and never has a stored response to answer with; a stored one that has been deleted or has expired. A plain 409 with Retry-After when the
 * first request is still not started after the wait (a retry may then find it).
 */
async function responseOfClaim(
  inference: InferenceServices,
  accountId: string,
  responseId: string,
  store: boolean,
  claim: { stillClaimed: () => Promise<boolean>; release: () => Promise<void> },
): Promise<StoredResponse | null> {
  let goneOnce = false;
  for (let waited = 0; ; waited += CLAIM_POLL_MS) {
    if (store) {
      const stored = await inference.responses.store.find(accountId, responseId);
      if (stored) return stored;
    }
    if (!(await claim.stillClaimed())) return null;
    // The job is admitted (its record written) only after the stored row is.
    if (await inference.records.find(responseId)) {
      if (!store) {
        // Stopped uncharged (its API process shutting down, ...): nothing to answer, the retry runs anew.
        if (await endedUncharged(inference, responseId)) {
          await claim.release();
          return null;
        }
        throw new ConflictError(
          "The request with this Idempotency-Key was sent with store: false: its response is not kept, so it cannot be answered again. Send another Idempotency-Key to run it again.",
          { code: "idempotency_response_not_stored", final: true },
        );
      }
      // Admitted, claimed, and no row: deleted or expired, unless the first request is giving its claim
      // back right now (it deletes its row, then releases the key): seen twice, a poll apart, it is gone.
      if (goneOnce) {
        throw new ConflictError(
          "The response of the request with this Idempotency-Key was deleted or has expired. Send another Idempotency-Key to create a new one.",
          { code: "idempotency_response_gone", final: true },
        );
      }
      goneOnce = true;
    } else if (waited % 1000 === 0 && (await chargedEarlier(inference.holdPool, responseId))) {
      // No record, yet the claim lasts and the response was charged: it ended and its record expired
      // (COMPLETION_RETENTION_S shorter than IDEMPOTENCY_TTL_S). It waited out the start timeout, then a
      // retryable 409, at every retry.
      throw store
        ? new ConflictError(
            "The response of the request with this Idempotency-Key was deleted or has expired. Send another Idempotency-Key to create a new one.",
            { code: "idempotency_response_gone", final: true },
          )
        : new ConflictError(
            "The request with this Idempotency-Key was sent with store: false: its response is not kept, so it cannot be answered again. Send another Idempotency-Key to run it again.",
            { code: "idempotency_response_not_stored", final: true },
          );
    }
    if (waited >= inference.limits.jobStartTimeoutMs) {
      throw new ApiError(409, "invalid_request_error", "The request with this Idempotency-Key has not started yet; retry later.", {
        code: "conflict",
        headers: { "retry-after": "1" },
      });
    }
    await new Promise((resolve) => setTimeout(resolve, CLAIM_POLL_MS));
  }
}

/**
 * POST /v1/responses: a chat job like a chat completion's (the same admission, budget hold, rate limits,
 * lanes, idempotency and traces), answered as a Response object or its stream events. A background
 * response answers `queued` at once, runs in the background lane and is followed to its end by this
 * process (ResponseKeeper) whoever listens; a stored one's result is kept in PostgreSQL.
 */
export function createResponseHandler(deps: AppDeps) {
  return async function createResponse(ctx: Context): Promise<void> {
    const body = validated(ctx, ResponseRequestSchema);
    const inference = requireInference(deps);
    const principal = principalOf(ctx);
    const store = body.store !== false;
    if (store) refuseUnstorable(body);
    const model = resolveModel(inference.registry, body.model, "chat", "/v1/responses");
    const contextItems = await previousContext(inference, principal.accountId, body.previous_response_id);
    const inputItems = toStoredItems(body.input, await inference.responses.store.findItems(principal.accountId, referencedItemIds(body.input)));
    checkCallOutputsAnswered(contextItems, inputItems);
    const request = toResponseChatRequest(body, [...contextItems, ...inputItems], model, inference.schemas);
    const background = body.background === true;
    const stream = body.stream === true;

    const id = newItemId("resp");
    const idempotencyKey = parseIdempotencyKey(ctx.get("idempotency-key") || undefined);
    if (idempotencyKey) {
      const hash = requestHash("responses", body);
      for (;;) {
        const claim = await inference.idempotency.claim(principal.keyId, idempotencyKey, hash, id);
        if (claim.won) break;
        if (claim.bodyHash !== hash) {
          throw new InvalidRequestError("This Idempotency-Key was already used with a different request.", {
            param: "Idempotency-Key",
            code: "idempotency_key_reused",
          });
        }
        const existing = await responseOfClaim(inference, principal.accountId, claim.completionId, store, {
          stillClaimed: () => inference.idempotency.stillClaimed(principal.keyId, idempotencyKey, claim.completionId),
          release: () => inference.idempotency.release(principal.keyId, idempotencyKey, claim.completionId),
        });
        if (!existing) continue; // the first request failed and gave its claim back: this one runs as a new request
        const runAnew = async () => {
          if (!(await endedUncharged(inference, existing.id))) return false;
          await inference.idempotency.release(principal.keyId, idempotencyKey, existing.id);
          return true;
        };
        if (await runAnew()) continue;
        ctx.set(COMPLETION_ID_HEADER, existing.id);
        if (stream) return streamStoredResponse(inference, ctx, existing, -1);
        // As the first request answers: a background response as it stands, any other once it has ended.
        ctx.set("cache-control", "no-store");
        if (existing.background) ctx.body = await currentObject(inference, existing);
        else {
          const ended = await endedObject(inference, ctx, existing);
          // Stopped uncharged while this retry waited on it (its API process shutting down): run anew.
          if (ended.status === "failed" && !ctx.res.destroyed && (await runAnew())) continue;
          // Its job fell silent before its end: a 500, as the first request got.
          if (!TERMINAL_STATUSES.has(ended.status)) throw new InternalApiError("The model stopped answering.");
          ctx.body = ended;
        }
        return;
      }
    }
    const now = deps.clock.now();
    const head: ResponseHead = { id, created_at: Math.floor(now.getTime() / 1000), model: model.id, background, settings: responseSettings(body, request) };
    if (store) {
      try {
        await inference.responses.store.create(
          {
            ...head,
            accountId: principal.accountId,
            contextItems,
            inputItems,
            state: { status: background ? "queued" : "in_progress", output: [], usage: null, error: null, incomplete_details: null, completed_at: null },
          },
          now,
        );
      } catch (error) {
        // Never stored: a retry with the same key must be free to run it (not a 409 for the key's lifetime).
        if (idempotencyKey) await inference.idempotency.release(principal.keyId, idempotencyKey, id).catch(() => undefined);
        throw error;
      }
    }
    const run = inference.responses.track(head, store);
    /** Before admission a failure is an ordinary HTTP error, and the response never was. */
    const undo = async () => {
      run.stop();
      // Its answer names no response: there is none to GET.
      ctx.remove(COMPLETION_ID_HEADER);
      if (store) await inference.responses.store.delete(principal.accountId, id).catch(() => undefined);
      if (idempotencyKey) await inference.idempotency.release(principal.keyId, idempotencyKey, id).catch(() => undefined);
    };
    ctx.set(COMPLETION_ID_HEADER, id);

    let admitted = false;
    let sse: SseResponse | null = null;
    let unsubscribe: (() => void) | null = null;
    let streamEnded: () => void = () => undefined;
    let terminalWritten = false;
    let lastSeq = -1;
    const streamDone = new Promise<void>((resolve) => {
      streamEnded = resolve;
    });
    if (stream) {
      sse = new SseResponse(
        ctx,
        () => {
          unsubscribe?.();
          // Disconnect is not cancel, as for chat: a response that is not background is stopped once nobody listens for the grace period.
          if (!background) run.releaseListener();
          streamEnded();
        },
        { keepAliveMs: inference.limits.sseKeepAliveMs },
      );
    }
    const job = inference.jobs.start(ctx, {
      model,
      endpoint: "responses",
      completionId: id,
      created: head.created_at,
      work: { kind: "chat", request },
      // A background response waits for a worker as long as a stream does, and counts as a request as any does.
      stream: stream || background,
      lane: background ? "background" : "interactive",
      // A background response waits in line as long as it takes, through a restart of this process.
      keepQueued: background,
      ...(store ? {} : { replayKeptAfterEndS: UNSTORED_REPLAY_KEPT_S }),
    });
    const admission = job.admitted.then(() => {
      admitted = true;
      if (sse) {
        sse.open();
        const write = eventWriter(sse, -1);
        unsubscribe = run.subscribe((event) => {
          lastSeq = event.sequence_number;
          if (write(event)) {
            terminalWritten = true;
            streamEnded();
          }
        });
      }
    });
    admission.catch(() => undefined);
    const starting = job.started;
    starting.then(
      (job) => {
        run.follow(job);
        if (!background && (sse?.clientGone || ctx.res.destroyed)) run.releaseListener();
      },
      (error: unknown) => {
        // Still in line (no worker yet, or this process stops): followed from its replay stream until it starts.
        if (error instanceof StillQueuedError) run.await(inference.follow(id, -1, { started: true }));
        else if (admitted) run.fail(toApiError(error).message);
      },
    );
    try {
      // A response someone waits for answers an HTTP error when its job does not start (as a chat completion);
      // a stream or a background response is answered once admitted (then a failed response).
      await (stream || background ? Promise.race([admission, starting]) : starting);
    } catch (error) {
      if (!admitted || (!stream && !background)) {
        await undo();
        throw error;
      }
    }
    // This process's shutdown grace nearly over (interruptRelays): the client is told, as a chat's is; the
    // response goes on (another process takes it over), to be read with GET.
    const interruption = background ? null : interruptionOf(inference, run.ended);
    const interrupted = () => interruption?.interrupted === true;
    if (stream) {
      await Promise.race([streamDone, run.ended, interruption?.happened ?? NEVER]);
      if (sse && admitted && !terminalWritten && !sse.clientGone) {
        (unsubscribe as (() => void) | null)?.();
        // Interrupted: a notice without an id (the client resumes after the last event it read). Else the
        // run stopped without the response's end (its job fell silent: left to a later pass, which stores
        // its end): the client is told so, not left with keep-alives for ever.
        if (interrupted()) endInterruptedStream(sse, lastSeq, run.builder.started);
        else endSilentStream(sse, id, lastSeq);
      }
      return;
    }
    if (!background) {
      ctx.res.on("close", () => {
        if (!ctx.res.writableFinished) run.releaseListener();
      });
      await Promise.race([run.ended, interruption?.happened ?? NEVER]);
      if (interrupted() && !run.builder.ended) {
        // Its client got nothing: the job is stopped, uncharged, for the retry the 503 asks for (the stop
        // goes out before the process closes Redis); this run reads on to the job's end and stores it.
        inference.responseCreates.track(stopInterruptedResponse(inference, model.id, id).finally(() => run.releaseListener()));
        throw new ServerShuttingDownError(false);
      }
      // The run stopped without the response's end (its job fell silent for JOB_IDLE_TIMEOUT_MS): a 500,
      // as a chat completion's, not a 200 of a response `in_progress` (a later GET reads how it ended).
      if (!run.builder.ended && !ctx.res.destroyed) throw new InternalApiError("The model stopped answering.");
      // Refused by the engine before any output (a prompt over the context in tokens): an HTTP 400, as
      // OpenAI answers it, and no response is kept (the request never was one); the model unavailable
      // before any output: a 503 with Retry-After, which the SDKs retry (it was a 200 `failed`).
      const refusal = run.builder.refusal;
      if (refusal) {
        await undo();
        throw jobErrorToApiError(refusal);
      }
    }
    ctx.set("cache-control", "no-store");
    ctx.body = run.builder.object();
  };
}

/** GET /v1/responses/{id}: the object as it stands; with stream=true its events after starting_after (or Last-Event-ID), then live. */
export function retrieveResponseHandler(deps: AppDeps) {
  return async function retrieveResponse(ctx: Context): Promise<void> {
    const inference = requireInference(deps);
    const query = validated(ctx, RetrieveResponseQuerySchema);
    const stored = await ownResponse(inference, ctx);
    if (query.stream === true) {
      // Resumed after starting_after, or after the Last-Event-ID an EventSource sends back (the `id:` of each event).
      const lastEventId = ctx.get("last-event-id");
      const after = resumePoint(query.starting_after, lastEventId);
      return streamStoredResponse(inference, ctx, stored, after);
    }
    ctx.set("cache-control", "no-store");
    ctx.body = await currentObject(inference, stored);
  };
}

/** DELETE /v1/responses/{id}: deleted for real (a running one is then stopped). */
export function deleteResponseHandler(deps: AppDeps) {
  return async function deleteResponse(ctx: Context): Promise<void> {
    const inference = requireInference(deps);
    const id = String(ctx.params.responseId ?? "");
    // One statement decides: of concurrent deletes, only the one whose DELETE removed the row answers 200
    // (and stops the job of a running one); the others find nothing to delete, a 404.
    const deleted = await inference.responses.store.delete(principalOf(ctx).accountId, id);
    if (!deleted) throw new NotFoundError(`Response with id '${id}' not found.`, { param: "response_id", code: "not_found" });
    const running = !TERMINAL_STATUSES.has(deleted.state.status);
    if (running) await stopJob(inference, deleted);
    await discardResponseReplay(inference.records, deleted.id, running);
    ctx.body = { id: deleted.id, object: "response", deleted: true };
  };
}

/** GET /v1/responses/{id}/input_items: the response's input items, a page at a time (after / before an item id). */
export function inputItemsHandler(deps: AppDeps) {
  return async function listInputItems(ctx: Context): Promise<void> {
    const inference = requireInference(deps);
    const query = validated(ctx, InputItemsQuerySchema);
    const stored = await ownResponse(inference, ctx);
    let items = query.order === "asc" ? stored.inputItems : [...stored.inputItems].reverse();
    for (const [param, cursor] of [
      ["after", query.after],
      ["before", query.before],
    ] as const) {
      if (cursor === undefined) continue;
      const at = items.findIndex((item) => item.id === cursor);
      if (at < 0) throw new InvalidRequestError(`No input item with id '${cursor}' in this response.`, { param, code: "invalid_value" });
      items = param === "after" ? items.slice(at + 1) : items.slice(0, at);
    }
    const limit = query.limit ?? 20;
    const page = query.before !== undefined ? items.slice(Math.max(0, items.length - limit)) : items.slice(0, limit);
    ctx.body = {
      object: "list",
      data: page,
      first_id: page[0]?.id ?? null,
      last_id: page.at(-1)?.id ?? null,
      has_more: page.length < items.length,
    };
  };
}
