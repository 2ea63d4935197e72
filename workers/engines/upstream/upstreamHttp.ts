import http, { type ClientRequest, type IncomingMessage, type OutgoingHttpHeaders, type RequestOptions } from "node:http";
import { context, propagation } from "@opentelemetry/api";
import https from "node:https";
import { urlToHttpOptions } from "node:url";
import { engineErrorFromResponse } from "./engineErrorFromResponse.ts";
import { upstreamSecrets } from "./redactUpstreamWords.ts";
import type { UpstreamCall } from "./upstreamCall.ts";

/** A 2xx answer whose body is still to be read, and the request to destroy to abandon it. */
export type UpstreamAnswer = { request: ClientRequest; response: IncomingMessage };

type SendRequest = (options: RequestOptions) => ClientRequest;

/**
 * How long an idle pooled connection is kept. Below the 5 s keep-alive of uvicorn (vLLM, SGLang) and
 * of Node servers, so we close an idle socket before the server does rather than reuse one it is
 * closing (the same default as undici's keepAliveTimeout).
 */
const IDLE_SOCKET_MS = 4_000;

/**
 * The adapter's HTTP transport: node:http / node:https (after the base URL's protocol) with one
 * keep-alive Agent per engine, instead of global fetch. Streaming through fetch (undici and WHATWG
 * streams, a promise per read) costs about twice the CPU per token of a node:http response read
 * with 'data' events, and the worker's CPU per token bounds its throughput.
 *
 * Responses are not decompressed: no Accept-Encoding is sent, so servers answer in identity.
 * Redirects are not followed: a 3xx is an upstream failure like any other non-2xx status.
 */
export class UpstreamHttp {
  readonly #baseUrl: string;
  readonly #agent: http.Agent;
  readonly #send: SendRequest;
  readonly #headers: Record<string, string>;
  /** What no error message may repeat: the key, the base URL, the host. */
  readonly #secrets: string[];
  /** Request options per path ("/chat/completions", "/embeddings"), computed once. */
  readonly #targets = new Map<string, RequestOptions>();

  constructor(baseUrl: string, apiKey: string | undefined) {
    this.#baseUrl = baseUrl;
    this.#secrets = upstreamSecrets(baseUrl, apiKey);
    const secure = new URL(baseUrl).protocol === "https:";
    // maxSockets Infinity: every concurrent stream gets its own connection (HTTP/1.1 cannot multiplex);
    // the engine set already bounds the concurrency per model.
    const agentOptions = { keepAlive: true, maxSockets: Infinity, maxFreeSockets: 1024, timeout: IDLE_SOCKET_MS };
    this.#agent = secure ? new https.Agent(agentOptions) : new http.Agent(agentOptions);
    this.#send = secure ? https.request : http.request;
    this.#headers = { "content-type": "application/json", accept: "text/event-stream, application/json" };
    if (apiKey !== undefined) this.#headers.authorization = `Bearer ${apiKey}`;
  }

  /**
   * POSTs `body` as JSON and resolves once the upstream answers with a 2xx status. Any other status
   * rejects with the error engineErrorFromResponse maps its body to; a connection that cannot be made,
   * or no answer within the call's timeout, rejects as unavailable.
   */
  async post(call: UpstreamCall, path: string, body: unknown): Promise<UpstreamAnswer> {
    const payload = JSON.stringify(body);
    call.touch();
    let answer = await this.#attempt(call, path, payload);
    // A pooled connection that fails with ECONNRESET before any byte of an answer is, in practice, one
    // the server closed as idle while we reused it: the request was not served, so send it again (what
    // the node:http documentation recommends for this race). Each retry uses up one dead pooled socket
    // and a new connection never asks for one, so this ends.
    while (answer === "retry") answer = await this.#attempt(call, path, payload);
    const status = answer.response.statusCode ?? 0;
    if (status >= 200 && status < 300) return answer;
    const text = await readText(call, answer, "connect");
    throw engineErrorFromResponse(status, text, this.#secrets);
  }

  /** Destroys every connection, idle or in use. */
  close(): void {
    this.#agent.destroy();
  }

  #attempt(call: UpstreamCall, path: string, payload: string): Promise<UpstreamAnswer | "retry"> {
    // Rejects at once, without sending anything (end() below must not write to a destroyed request).
    if (call.aborted) return call.wait("connect", () => undefined);
    const headers: OutgoingHttpHeaders = { ...this.#headers, "content-length": String(Buffer.byteLength(payload)) };
    // The job's trace goes on in the engine (vLLM and SGLang continue a W3C traceparent); nothing without tracing.
    propagation.inject(context.active(), headers);
    const request = this.#send({ ...this.#target(path), method: "POST", agent: this.#agent, headers });
    call.attach(request);
    // Headers and body may leave in two segments: without this, Nagle's algorithm can hold the second
    // one until the server's delayed ACK of the first (tens of milliseconds of TTFT).
    request.setNoDelay(true);
    const answer = call.wait<UpstreamAnswer | "retry">("connect", (settle) => {
      request.on("response", (response: IncomingMessage) => settle.done({ request, response }));
      request.on("error", (error: NodeJS.ErrnoException) => {
        if (request.reusedSocket && error.code === "ECONNRESET" && !settle.settled) settle.done("retry");
        else settle.fail(error);
      });
    });
    request.end(payload);
    return answer;
  }

  #target(path: string): RequestOptions {
    let target = this.#targets.get(path);
    if (target === undefined) {
      // urlToHttpOptions takes the brackets off an IPv6 host and keeps user:password as basic auth.
      target = urlToHttpOptions(new URL(this.#baseUrl + path));
      this.#targets.set(path, target);
    }
    return target;
  }
}

/** Reads a whole (small) body as UTF-8: an error body, an embeddings answer. */
export function readText(call: UpstreamCall, { request, response }: UpstreamAnswer, phase: "connect" | "stream"): Promise<string> {
  return call.wait<string>(phase, (settle) => {
    const parts: Buffer[] = [];
    response.on("data", (part: Buffer) => {
      call.touch();
      parts.push(part);
    });
    response.on("end", () => settle.done(Buffer.concat(parts).toString("utf8")));
    response.on("error", settle.fail);
    response.on("close", () => settle.fail(new Error("connection closed before the end of the answer")));
    request.on("error", settle.fail);
  });
}
