import type { Context } from "koa";
import { type DeltaMessage, isTerminal } from "../../../../contracts/deltaMessage.ts";
import type { InferenceServices } from "../shared/requireInference.ts";
import { SseResponse } from "../../streaming/sseResponse.ts";
import { ResponseEventBuilder, type ResponseEvent } from "./responseEventBuilder.ts";
import { responseObject, TERMINAL_STATUSES, type ResponseObject } from "./responseObject.ts";
import type { StoredResponse } from "./responseStore.ts";
import type { CompletionRecord } from "../../jobs/completionRecords.ts";
import { InvalidRequestError, ServerShuttingDownError, ServiceUnavailableError } from "../../../http/errors.ts";

const TERMINAL_EVENTS = new Set(["response.completed", "response.incomplete", "response.failed"]);
const nowSeconds = () => Math.floor(Date.now() / 1000);

/**
 * Writes a response's events to an SSE stream (each with its sequence number as the SSE id), ending after
 * the terminal one. A resume point past the terminal event (no event of this stream has that number) ends
 * with an `error` event that says so (without an id, numbered as the terminal one): not with nothing,
 * which a client reads as a stream cut short.
 */
export function eventWriter(sse: SseResponse, afterSeq: number): (event: ResponseEvent) => boolean {
  return (event) => {
    if (event.sequence_number > afterSeq) sse.event(event.sequence_number, event, event.type);
    if (!TERMINAL_EVENTS.has(event.type)) return false;
    if (afterSeq > event.sequence_number) {
      // Without an id, and numbered as the last event (no event has a number past it: a client that kept
      // this one as its resume point would be told the same for ever).
      const error = {
        type: "error",
        code: "invalid_value",
        message: `starting_after ${afterSeq} is past this response's last event (${event.sequence_number}, ${event.type}).`,
        param: "starting_after",
        sequence_number: event.sequence_number,
      };
      sse.namedJsonWithoutId("error", JSON.stringify(error));
      sse.end();
      return true;
    }
    sse.end();
    return true;
  };
}

/**
 * The job messages a stored response's final state stands for, when its replay stream is gone (kept for
 * COMPLETION_RETENTION_S, the response for RESPONSES_RETENTION_DAYS): its output items as whole deltas,
 * then its end. The events differ from the live stream's in how the deltas are cut.
 */
function messagesOf(stored: StoredResponse): DeltaMessage[] {
  const messages: DeltaMessage[] = [];
  let seq = 1;
  let calls = 0;
  for (const item of stored.state.output) {
    if (item.type === "reasoning") messages.push({ seq: seq++, type: "delta", delta: { reasoning: (item.content ?? []).map((c) => c.text).join("") } });
    else if (item.type === "message") messages.push({ seq: seq++, type: "delta", delta: { content: item.content.map((c) => c.text).join("") } });
    else if (item.type === "function_call") {
      const call = { index: calls++, id: item.call_id, type: "function" as const, function: { name: item.name, arguments: item.arguments } };
      messages.push({ seq: seq++, type: "delta", delta: { toolCalls: [call] } });
    }
  }
  const usage = stored.state.usage;
  const charged = usage
    ? { promptTokens: usage.input_tokens, completionTokens: usage.output_tokens, reasoningTokens: usage.output_tokens_details.reasoning_tokens }
    : { promptTokens: 0, completionTokens: 0, reasoningTokens: 0 };
  const status = stored.state.status;
  if (status === "completed" || status === "incomplete") {
    messages.push({ seq: seq++, type: "finish", finishReason: status === "incomplete" ? "length" : calls > 0 ? "tool_calls" : "stop" });
    messages.push({ seq: seq++, type: "usage", usage: charged });
  } else {
    const kind = status === "cancelled" ? "cancelled" : "internal";
    messages.push({
      seq: seq++,
      type: "error",
      error: { kind, message: stored.state.error?.message ?? "The response was cancelled.", param: null },
      usage: charged,
    });
  }
  return messages;
}

/** Whether the response's replay stream holds its job's messages from the first (seq 0) to its end. */
async function wholeReplay(inference: InferenceServices, id: string): Promise<boolean> {
  if ((await inference.records.lastMessage(id)) === undefined) return false;
  return (await inference.records.firstMessage(id))?.seq === 0;
}

/**
 * A stored response's stream events after `afterSeq`, then live until its end, from any API process: its
 * events are derived again from the start of its job's replay stream, so each has the sequence number it
 * had in the first stream (a client that dropped a stream resumes with starting_after, and gets every
 * event exactly once across both connections). A response still queued stays at `response.queued` until
 * its job's `started` message (then `response.in_progress`), as on the stream of its create.
 */
export async function streamStoredResponse(inference: InferenceServices, ctx: Context, stored: StoredResponse, afterSeq: number): Promise<void> {
  // An ended response whose replay stream is gone, or lost its start (Redis restarted empty while the
  // job ran: the stream holds only what came after): its events are derived from what is stored, cut
  // otherwise than the first stream's, so no event number of that stream can be resumed after.
  const rebuilt = TERMINAL_STATUSES.has(stored.state.status) && !(await wholeReplay(inference, stored.id));
  if (rebuilt && afterSeq >= 0) {
    throw new InvalidRequestError(
      "This response's stream events are no longer kept, so a stream cannot be resumed after one of them; read its stream again from the start (no starting_after or Last-Event-ID): its events then carry numbers of their own.",
      { param: "starting_after", code: "invalid_value" },
    );
  }
  const builder = new ResponseEventBuilder(stored, nowSeconds);
  // With the job's `started`: a queued response's stream says `response.queued` until its job starts.
  // Gapless: read from the start, a stream missing its first messages (lost with Redis) ends the read.
  const follower = inference.followForClient(stored.accountId, stored.id, -1, { started: true, gapless: true });
  // A client of a response that is not in the background listens to it, as a chat completion's resume
  // does: while it reads, the response is not abandoned (its first client gone, or that client's API
  // process killed); once it leaves before the end, the grace period counts from then.
  const listening = await listenTo(inference, stored, rebuilt);
  const sse = new SseResponse(ctx, () => follower.release(), { keepAliveMs: inference.limits.sseKeepAliveMs });
  sse.open();
  const write = eventWriter(sse, afterSeq);
  let lastSeq = afterSeq;
  const emit = (events: ResponseEvent[]) =>
    events.some((event) => {
      lastSeq = Math.max(lastSeq, event.sequence_number);
      return write(event);
    });
  try {
    if (emit(stored.state.status === "queued" ? builder.begin() : builder.start())) return;
    if (rebuilt) {
      for (const message of messagesOf(stored)) if (emit(builder.take(message))) return;
      return;
    }
    for (;;) {
      const message = await follower.next();
      if (sse.clientGone) return;
      if (emit(builder.take(message))) return;
    }
  } catch (error) {
    // This process stops (its shutdown grace nearly over): the response goes on; the notice carries no
    // id, so the client resumes after the last event it read, and that event's number (RESUME_POINT_NOTE).
    if (error instanceof ServerShuttingDownError && !sse.clientGone) {
      sse.namedJsonWithoutId("error", JSON.stringify({ type: "error", code: error.code, message: error.message, param: null, sequence_number: lastSeq }));
      sse.end();
      return;
    }
    // The client went away, or the job fell silent (or its replay was lost): the stream ends here,
    // saying so (the response is read again later).
    if (!sse.clientGone) endSilentStream(sse, stored.id, lastSeq, error instanceof ServiceUnavailableError);
    else sse.end();
  } finally {
    follower.release();
    if (listening) inference.abandonment.detached(listening);
  }
}

/** Attaches a client to a running response that is not in the background; its record (to detach it later), or null. */
async function listenTo(inference: InferenceServices, stored: StoredResponse, rebuilt: boolean): Promise<CompletionRecord | null> {
  if (stored.background || rebuilt || TERMINAL_STATUSES.has(stored.state.status)) return null;
  const record = await inference.records.find(stored.id).catch(() => null);
  if (!record) return null;
  return (await inference.records.attach(stored.id).then(
    () => true,
    () => false,
  ))
    ? record
    : null;
}

/**
 * The Response object of a stored response as it stands: its stored result once it ended; while it
 * runs, what the run of this process, or else its replay stream, shows so far.
 */
export async function currentObject(inference: InferenceServices, stored: StoredResponse): Promise<ResponseObject> {
  // Its owner's cancel marks it `cancelled` at once; its output and usage are written once its job has
  // stopped, after its stream's last event: until then, what its run or replay stream shows (a GET right
  // after that event answered `cancelled` with no output and no usage).
  const resultPending = stored.state.status === "cancelled" && stored.state.usage === null;
  if (TERMINAL_STATUSES.has(stored.state.status) && !resultPending) {
    return responseObject(stored, stored.state);
  }
  const run = inference.responses.run(stored.id);
  const builder = run?.builder ?? new ResponseEventBuilder(stored, nowSeconds);
  if (!run) {
    builder.begin();
    for (const message of await inference.subscriber.replay(stored.id)) {
      if (message.type === "started") builder.start();
      else builder.take(message);
    }
  }
  const object = builder.object();
  if (!resultPending || builder.ended) return object;
  // Its job still stopping: the output so far, cancelled; nothing to read (its replay gone): as stored.
  return object.output.length > 0 ? { ...object, status: "cancelled" } : responseObject(stored, stored.state);
}

/** How long a cancel waits for the response's job to stop before it answers (the object as it stands then). */
const STOPPED_WITHIN_MS = 5_000;

/**
 * The Response object of a response whose job was just told to stop (its owner's cancel), once it has
 * stopped: its output so far and the usage charged for it, and the status its stream ended with
 * (`cancelled`; `completed` or `incomplete` when the job ended whole before the cancel reached it, as it
 * is then stored and charged). Waits at most STOPPED_WITHIN_MS; the object as it stands then otherwise.
 * Followed by no process here, an ended response's result is stored too.
 */
export async function stoppedObject(inference: InferenceServices, stored: StoredResponse): Promise<ResponseObject> {
  const run = inference.responses.run(stored.id);
  if (run) {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([run.ended, new Promise((resolve) => (timer = setTimeout(resolve, STOPPED_WITHIN_MS)))]);
    clearTimeout(timer);
    return run.builder.object();
  }
  for (const giveUpAt = Date.now() + STOPPED_WITHIN_MS; Date.now() < giveUpAt; ) {
    const last = await inference.records.lastMessage(stored.id).catch(() => undefined);
    if (last && isTerminal(last)) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const builder = new ResponseEventBuilder(stored, nowSeconds);
  builder.begin();
  for (const message of await inference.subscriber.replay(stored.id)) {
    if (message.type === "started") builder.start();
    else builder.take(message);
  }
  // No process of this one follows it (the one that created it stopped, or was killed, and none took it
  // over yet, nor will: a cancelled response is no orphan): its end is stored here, as its follower would.
  if (builder.ended) await inference.responses.store.finish(stored.id, builder.state).catch(() => undefined);
  return builder.object();
}

/**
 * The Response object of a stored response once it has ended, as its own create answers when not
 * streamed nor in the background (a duplicate with its Idempotency-Key waits for it likewise): the run
 * of this process, or else its replay stream, followed to its end; what it shows then if that stream
 * falls silent or `ctx`'s client goes away first.
 */
export async function endedObject(inference: InferenceServices, ctx: Context, stored: StoredResponse): Promise<ResponseObject> {
  if (TERMINAL_STATUSES.has(stored.state.status)) return responseObject(stored, stored.state);
  const run = inference.responses.run(stored.id);
  if (run) {
    await Promise.race([run.ended, new Promise((resolve) => ctx.res.once("close", resolve))]);
    return run.builder.object();
  }
  const builder = new ResponseEventBuilder(stored, nowSeconds);
  const follower = inference.followForClient(stored.accountId, stored.id, -1, { started: true, gapless: true });
  const release = () => follower.release();
  ctx.res.once("close", release);
  try {
    builder.begin();
    for (;;) {
      const message = await follower.next();
      if (message.type === "started") builder.start();
      else builder.take(message);
      if (builder.ended) return builder.object();
    }
  } catch {
    const current = await inference.responses.store.find(stored.accountId, stored.id);
    return currentObject(inference, current ?? stored);
  } finally {
    ctx.res.off("close", release);
    follower.release();
  }
}

/**
 * RESUME_POINT_NOTE: an `error` event that ends a stream short of the response's end (an API process
 * stopping, the job silent, the replay lost) repeats the `sequence_number` of the last event sent: the
 * client's resume point (`starting_after`). Numbered after it, it took the number of the next real event,
 * and a client that resumed after the highest number it saw (the SDKs show no SSE id) lost that event.
 */

/**
 * Ends a response's stream that stopped short of the response's end (its job fell silent, or its replay
 * was lost with Redis): an `error` event without an id (the response goes on or is stored later; a
 * client reads it again with GET, or resumes after its last event), not keep-alives for ever.
 */
export function endSilentStream(sse: SseResponse, id: string, lastSeq: number, lost = false): void {
  const message = lost
    ? `Part of the response's stream was lost with Redis; read it again once it has ended (GET /v1/responses/${id}), from what is stored then.`
    : `The response's stream stopped before its end (its model stopped answering); read it again later: GET /v1/responses/${id}.`;
  // Lost: `redis_unavailable`, as a chat completion's read of what was lost says.
  const code = lost ? "redis_unavailable" : "server_error";
  sse.namedJsonWithoutId("error", JSON.stringify({ type: "error", code, message, param: null, sequence_number: lastSeq }));
  sse.end();
}

/**
 * A stored response as its job left it: one still marked running whose job ended, while no process here
 * follows it (the process that followed it stopped, and none took it over yet: up to a lease and a
 * tick), is stored as ended now, from its replay stream, as its follower would have.
 */
export async function settledFromReplay(inference: InferenceServices, stored: StoredResponse): Promise<StoredResponse> {
  if (TERMINAL_STATUSES.has(stored.state.status) || inference.responses.run(stored.id)) return stored;
  const last = await inference.records.lastMessage(stored.id).catch(() => undefined);
  if (!last || !isTerminal(last)) return stored;
  const builder = new ResponseEventBuilder(stored, nowSeconds);
  builder.begin();
  for (const message of await inference.subscriber.replay(stored.id)) {
    if (message.type === "started") builder.start();
    else builder.take(message);
  }
  if (!builder.ended) return stored;
  await inference.responses.store.finish(stored.id, builder.state);
  return (await inference.responses.store.find(stored.accountId, stored.id)) ?? stored;
}

/** Ends a create's stream when this process's shutdown grace is nearly over: a notice without an id (the response goes on; the client resumes after its last event elsewhere). */
export function endInterruptedStream(sse: SseResponse, lastSeq: number, resumable = true): void {
  // Not resumable: its job had not started and was taken off the queue ("stopped, retry it").
  const notice = new ServerShuttingDownError(resumable);
  sse.namedJsonWithoutId("error", JSON.stringify({ type: "error", code: notice.code, message: notice.message, param: null, sequence_number: lastSeq }));
  sse.end();
}

/**
 * A create's interruption by this process's shutdown (InferenceServices.interruptRelays), until `ended`:
 * `happened` resolves when it comes (at once when it came already); `interrupted` says whether it did.
 */
export function interruptionOf(inference: InferenceServices, ended: Promise<void>): { happened: Promise<void>; readonly interrupted: boolean } {
  const state = { interrupted: false, happened: Promise.resolve() };
  state.happened = new Promise<void>((resolve) => {
    const interrupt = () => {
      state.interrupted = true;
      resolve();
    };
    const forget = inference.responseCreates.addRelay(interrupt);
    if (inference.responseCreates.interrupting) interrupt();
    void ended.then(forget);
  });
  return state;
}
