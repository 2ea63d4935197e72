import { STATUS_CODES, type Server } from "node:http";
import type { Duplex } from "node:stream";
import { appHandles, markParserRefusal, parserRefusalOf } from "./clientClosed.ts";

/** What Node's HTTP parser refuses before the app sees a request, answered in OpenAI's error shape. */
const ANSWERS: Record<string, { status: number; code: string; message: string }> = {
  HPE_HEADER_OVERFLOW: {
    status: 431,
    code: "request_header_fields_too_large",
    message: "The request's headers are too large (at most 16 KiB and 256 headers in all).",
  },
};

/** The parser's 408, saying the bounds this server has (HEADERS_TIMEOUT_MS, REQUEST_TIMEOUT_MS). */
function requestTimeoutAnswer(timeouts: { headersTimeoutMs: number; requestTimeoutMs: number }): { status: number; code: string; message: string } {
  const seconds = (ms: number) => `${Math.round(ms / 100) / 10} s`;
  return {
    status: 408,
    code: "request_timeout",
    message: `The request did not arrive in time: its headers took longer than ${seconds(timeouts.headersTimeoutMs)}, or the whole request longer than ${seconds(timeouts.requestTimeoutMs)}.`,
  };
}

/**
 * Answers a request the HTTP parser refused (headers too large, a malformed request line, headers too
 * slow) with an OpenAI-shaped error body and closes the connection, where Node would write a bare status
 * line. A connection already reset or half-written to is only closed.
 */
export function answerClientErrors(
  server: Server,
  timeouts: { headersTimeoutMs: number; requestTimeoutMs: number },
  refused: (code: string) => void = () => undefined,
): void {
  const timedOut = requestTimeoutAnswer(timeouts);
  server.on("clientError", (error: NodeJS.ErrnoException, socket: Duplex) => {
    const code = error.code ?? "";
    if (error.code === "ECONNRESET" || !socket.writable) {
      socket.destroy();
      return;
    }
    const answer =
      (code === "ERR_HTTP_REQUEST_TIMEOUT" ? timedOut : ANSWERS[code]) ??
      (code.startsWith("HPE_") ? { status: 400, code: "invalid_request", message: "The request is not valid HTTP." } : null);
    if (!answer) {
      socket.destroy();
      return;
    }
    // Mid-way through a request the app handles: its access line and metrics say this status; otherwise
    // nothing else records it.
    if (appHandles(socket) || parserRefusalOf(socket) !== undefined) markParserRefusal(socket, answer.status);
    else refused(answer.code);
    const body = errorBodyOf(answer);
    socket.end(
      `HTTP/1.1 ${answer.status} ${STATUS_CODES[answer.status]}\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
    );
  });
}

function errorBodyOf(answer: { code: string; message: string }): string {
  return JSON.stringify({ error: { message: answer.message, type: "invalid_request_error", param: null, code: answer.code } });
}

/** The 431 of headers over the limits, for a request the parser let through (headersOverLimits). */
export const HEADERS_TOO_LARGE = { status: 431, body: errorBodyOf(ANSWERS.HPE_HEADER_OVERFLOW!) };
