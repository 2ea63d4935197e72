import type { ChatStreamAccumulator } from "./chatStreamAccumulator.ts";
import { EngineError } from "../engine.ts";
import { SseParser, type SseSink, SseTooLongError } from "./sseParser.ts";
import type { UpstreamCall } from "./upstreamCall.ts";
import type { UpstreamAnswer } from "./upstreamHttp.ts";

/**
 * Feeds the SSE body of a streamed chat to the accumulator chunk by chunk, straight from the socket's
 * 'data' events (no async iteration: a promise per chunk is what made fetch expensive). Resolves once
 * the accumulator is done (`[DONE]`) or the body ends; the caller decides whether what came is a
 * complete answer.
 *
 * After `[DONE]` the listener stays: it reads the rest of the body (normally just the end of the
 * chunked encoding) and keeps touching the call, so the response ends and its socket goes back to the
 * pool; the caller releases the call on the response's 'end' / 'close'.
 *
 * Rejects with the accumulator's EngineError for an error inside the stream, with the delta sink's
 * own error unchanged, and with an internal error when the connection breaks or stalls.
 */
export function relayChatStream(call: UpstreamCall, { request, response }: UpstreamAnswer, accumulator: ChatStreamAccumulator): Promise<void> {
  const parser = new SseParser();
  return call.wait<void>("stream", (settle) => {
    // Each event as the parser reads it (no array of events per read).
    const onEvent: SseSink = (event, data) => {
      // The delta sink may have aborted the call or closed the engine: relay nothing more. Nothing after `[DONE]`.
      if (settle.settled || accumulator.done) return;
      try {
        accumulator.handle(event, data);
      } catch (error) {
        settle.rethrow(error);
      }
    };
    // The response's StringDecoder keeps a character split across reads whole (see SseParser.pushText).
    response.setEncoding("utf8");
    response.on("data", (text: string) => {
      call.touch();
      if (settle.settled) return;
      try {
        parser.feedText(text, onEvent);
      } catch (error) {
        // A line or event too long to read (SseTooLongError): the reply fails; its connection is dropped.
        request.destroy();
        settle.rethrow(tooLong(error));
        return;
      }
      if (accumulator.done) settle.done();
    });
    response.on("end", () => {
      if (settle.settled) return;
      try {
        parser.finish(onEvent);
      } catch (error) {
        settle.rethrow(tooLong(error));
        return;
      }
      settle.done();
    });
    response.on("error", settle.fail);
    response.on("close", () => settle.fail(new Error("connection closed before the end of the stream")));
    request.on("error", settle.fail);
  });
}

/** The parser's refusal of a line or event too long, as the engine's failure; any other error unchanged. */
function tooLong(error: unknown): unknown {
  return error instanceof SseTooLongError ? new EngineError("internal", error.message) : error;
}
