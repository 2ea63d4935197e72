import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import { answerClientErrors, HEADERS_TOO_LARGE } from "./clientErrors.ts";
import { handledByApp } from "./clientClosed.ts";
import { inviteBodiesOnlyWhenRead } from "./expectContinue.ts";

/** The most headers a request may have; Node would drop the ones past its own count, silently. */
export const MAX_REQUEST_HEADERS = 256;
/** The most bytes a request's headers may have in all (names, values and their separators). */
export const MAX_REQUEST_HEADER_BYTES = 16 * 1024;

type Handle = (req: IncomingMessage, res: ServerResponse) => void;

/**
 * The API's HTTP server around the app's handler: requests refused by the parser (headers over 16 KiB
 * in one piece, not HTTP, too slow) answered in OpenAI's error shape; bodies invited only when read
 * (`Expect: 100-continue`); and a request with more than MAX_REQUEST_HEADERS headers, or more than
 * MAX_REQUEST_HEADER_BYTES of them in all (which Node's parser lets through when they come as many small
 * ones), answered 431 before the app sees it, rather than handled without the headers past Node's count
 * (an `Authorization` past it was a 403 for a key that was sent).
 */
export function createApiServer(handle: Handle, options: { headersTimeoutMs: number; requestTimeoutMs: number; onRefusal?: (code: string) => void }): Server {
  const refused = options.onRefusal ?? (() => undefined);
  const guarded: Handle = (req, res) => {
    if (headersOverLimits(req.rawHeaders)) {
      refused("request_header_fields_too_large");
      res.writeHead(HEADERS_TOO_LARGE.status, {
        "content-type": "application/json; charset=utf-8",
        "content-length": Buffer.byteLength(HEADERS_TOO_LARGE.body),
        connection: "close",
      });
      res.end(HEADERS_TOO_LARGE.body);
      return;
    }
    // HTTP/1.1 requires Host (RFC 9112 §3.2): refused here in OpenAI's shape (Node's own check sent a bare 400).
    if (req.headers.host === undefined && req.httpVersionMajor === 1 && req.httpVersionMinor >= 1) {
      refused("missing_host");
      refuse(res, 400, "missing_host", "An HTTP/1.1 request must have a Host header.");
      return;
    }
    // Two Host headers (RFC 9112 §3.2: a 400): Node keeps the first, a proxy in front may route by the last.
    if (hostHeaders(req.rawHeaders) > 1) {
      refused("duplicate_host");
      refuse(res, 400, "duplicate_host", "The Host header was sent more than once; send it once.");
      return;
    }
    handledByApp(req.socket, res);
    handle(req, res);
  };
  // Headers that do not complete within headersTimeoutMs (a connection opened and left silent, or fed a
  // byte at a time: Node's 60 s, checked every 30 s, held it about 80 s) are answered 408 and closed,
  // checked every second.
  const server = createServer(
    {
      headersTimeout: options.headersTimeoutMs,
      requestTimeout: Math.max(options.requestTimeoutMs, options.headersTimeoutMs),
      connectionsCheckingInterval: Math.min(1_000, options.headersTimeoutMs),
      requireHostHeader: false,
    },
    guarded,
  );
  // One more than allowed: a request with more is seen to have more (and refused), none is cut short.
  server.maxHeadersCount = MAX_REQUEST_HEADERS + 1;
  inviteBodiesOnlyWhenRead(server, guarded);
  answerClientErrors(
    server,
    { headersTimeoutMs: options.headersTimeoutMs, requestTimeoutMs: Math.max(options.requestTimeoutMs, options.headersTimeoutMs) },
    refused,
  );
  answerUnservedProtocol(server, refused);
  return server;
}

/**
 * What Node answers on its own otherwise: an `Expect` other than `100-continue` (a bare 417) and a
 * CONNECT (the socket closed without a word), answered in OpenAI's error shape, the connection closed.
 */
function answerUnservedProtocol(server: Server, refused: (code: string) => void): void {
  server.on("checkExpectation", (_req: IncomingMessage, res: ServerResponse) => {
    refused("expectation_failed");
    refuse(res, 417, "expectation_failed", "The request's Expect header asks for what this server does not do (only `100-continue` is served).");
  });
  server.on("connect", (_req: IncomingMessage, socket: Duplex) => {
    refused("method_not_allowed");
    const body = JSON.stringify({
      error: { message: "CONNECT is not served: this is an HTTP API, not a proxy.", type: "invalid_request_error", param: null, code: "method_not_allowed" },
    });
    socket.end(
      `HTTP/1.1 405 Method Not Allowed\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
    );
  });
}

function refuse(res: ServerResponse, status: number, code: string, message: string): void {
  const body = JSON.stringify({ error: { message, type: "invalid_request_error", param: null, code } });
  res.writeHead(status, { "content-type": "application/json; charset=utf-8", "content-length": Buffer.byteLength(body), connection: "close" });
  res.end(body);
}

function hostHeaders(raw: readonly string[]): number {
  let count = 0;
  for (let i = 0; i < raw.length; i += 2) if (raw[i]!.length === 4 && raw[i]!.toLowerCase() === "host") count++;
  return count;
}

/** Whether raw headers (name, value, name, value, ...) are over the count or the size in all. */
export function headersOverLimits(rawHeaders: readonly string[]): boolean {
  if (rawHeaders.length > 2 * MAX_REQUEST_HEADERS) return true;
  // Each header as sent: name, ": ", value, CRLF (characters: a latin1 byte each, as Node decodes them).
  let bytes = 0;
  for (const part of rawHeaders) bytes += part.length + 2;
  return bytes > MAX_REQUEST_HEADER_BYTES;
}
