import { errorBody, InternalApiError, InvalidRequestError, ServerShuttingDownError } from "../../http/errors.ts";
import { toApiError } from "../../http/errorHandler.ts";
import type { SseResponse } from "./sseResponse.ts";
import { EndedBeforeResumeError, JobReleasedError, type RunningJob } from "../jobs/runningJob.ts";
import { jobErrorToApiError } from "../jobs/jobErrorToApiError.ts";
import type { StreamFormat } from "./streamFormat.ts";

/**
 * Relays a running job to the client as SSE, one event per worker message (its sequence number as the
 * event id). An error before any output throws (an ordinary HTTP error); after output it becomes an
 * error event followed by `[DONE]`. A client that goes away only stops the relay: the job runs on.
 */
export async function relayStream(
  job: RunningJob,
  sse: SseResponse,
  format: StreamFormat,
  includeUsage: boolean,
  resumed: { firstSent: boolean; afterSeq?: number } = { firstSent: false },
): Promise<void> {
  // A resumed stream goes on as the original would have: its first chunk (the role) was sent already.
  let first = !resumed.firstSent;
  try {
    for (;;) {
      const message = await job.next();
      if (sse.clientGone) return;
      switch (message.type) {
        case "delta": {
          // The chunk as JSON text (StreamFormat.deltaJson): no chunk object per token, no JSON.stringify of one.
          const chunk = format.deltaJson(message.delta, first);
          if (chunk === null) break;
          sse.eventJson(message.seq, chunk);
          first = false;
          break;
        }
        case "finish":
          sse.event(message.seq, format.finish(message.finishReason, first));
          first = false;
          break;
        case "usage":
          if (includeUsage) sse.event(message.seq, format.usage(message.usage));
          sse.done();
          return;
        case "error": {
          const error = jobErrorToApiError(message.error, message.usage);
          if (!sse.opened) throw error;
          // A cancelled stream (or one that failed after it was charged) still ends with its usage chunk
          // (what was charged) when it was asked for. The two events come of one message: the usage chunk
          // goes without an id, right before the error event that carries it (in the same write), so a
          // client resuming after that id is told nothing again, and one that missed it gets both.
          if (includeUsage && message.usage) sse.unnamedJson(JSON.stringify(format.usage(message.usage)));
          sse.event(message.seq, errorBody(error));
          sse.done();
          return;
        }
        default:
          throw new InternalApiError("Unexpected message from the worker.");
      }
    }
  } catch (error) {
    if (error instanceof JobReleasedError || sse.clientGone) return;
    if (error instanceof EndedBeforeResumeError) {
      // Resumed at its last event: the client has had everything; the stream just ends. Resumed at a point
      // past it (no event had that id): an error event says so, not a silent end that reads as a stream
      // cut short or as everything received; without an id (no event of the reply has one past the last:
      // a client that kept it as its resume point would be told the same for ever).
      if (error.afterSeq > error.lastSeq) {
        sse.unnamedJson(
          JSON.stringify(
            errorBody(
              new InvalidRequestError(`starting_after ${error.afterSeq} is past this completion's last event (${error.lastSeq}).`, {
                param: "starting_after",
                code: "invalid_value",
              }),
            ),
          ),
        );
      }
      sse.done();
      return;
    }
    if (!sse.opened) throw error;
    if (error instanceof ServerShuttingDownError) {
      // The reply goes on: the notice carries no id, so the client resumes after the last one it read.
      sse.unnamedJson(JSON.stringify(errorBody(error)));
      sse.done();
      return;
    }
    // The API's own end of the stream (the reply lost with Redis, the job silent): without an id, as the
    // reply's own events may still come under the next numbers (a resume after the last id read gets them,
    // or the job's own last message).
    sse.unnamedJson(JSON.stringify(errorBody(toApiError(error))));
    sse.done();
  } finally {
    job.release();
  }
}
