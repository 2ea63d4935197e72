import type { Context, Next } from "koa";
import { ApiError, InvalidRequestError } from "./errors.ts";
import { bodyHeldBack, inviteBody } from "./expectContinue.ts";
import { DEFAULT_JSON_SHAPE_LIMITS, type JsonShapeLimits, JsonShapeScanner } from "./jsonShapeBudget.ts";
import { type BodyLimits, type BodyReader, stateOf } from "./requestState.ts";
import { markParserRefusal } from "./clientClosed.ts";

export type { BodyLimits };

/** Routes anyone may call (registration, sign-in): a few short fields, so a small body. */
export const PUBLIC_BODY_LIMITS: BodyLimits = { maxBytes: 16 * 1024, public: true };

const JSON_TYPES = ["application/json", "application/json-patch+json", "application/vnd.api+json"];
const PARSED_METHODS = new Set(["POST", "PUT", "PATCH"]);
/**
 * A body left unread (refused before or part-way through reading it) is received and dropped, unparsed,
 * before the answer goes out, for up to this long and twice the body limit: a client that writes its
 * whole body before it reads then gets the answer instead of a reset. Past either bound the answer
 * closes the connection.
 */
const DRAIN_MAX_MS = 2000;

/**
 * Reads request bodies only when a route asks (validate(schema), after its authentication), never before:
 * an unauthenticated request costs no parse. Installs ctx.state.bodyReader for validate. What nobody read
 * of a body is dropped before the answer (bounded: DRAIN_MAX_MS, the body limit), else the answer closes
 * the connection, so nobody waits on a socket the server no longer reads.
 */
export function requestBodies(options: { maxBytes: number; idleMs: number; publicDeadlineMs: number }) {
  return async function installBodyReader(ctx: Context, next: Next): Promise<void> {
    const reader: BodyReader = {
      read(limits = {}) {
        return readJsonBody(ctx, {
          maxBytes: Math.min(limits.maxBytes ?? options.maxBytes, options.maxBytes),
          shape: limits.shape,
          idleMs: options.idleMs,
          deadlineMs: limits.public ? options.publicDeadlineMs : undefined,
        });
      },
    };
    stateOf(ctx).bodyReader = reader;
    let tooSlow = false;
    try {
      await next();
    } catch (error) {
      tooSlow = error instanceof ApiError && error.status === 408;
      throw error;
    } finally {
      // A client still waiting for `100 Continue` sends no body to drain, and a body that came too slowly
      // is not waited for again (its 408 came DRAIN_MAX_MS late): the connection closes instead.
      if (tooSlow || bodyHeldBack(ctx) || !(await drain(ctx, options.maxBytes))) ctx.set("connection", "close");
    }
  };
}

/** Receives and drops the rest of the request body; false when it did not end within the bounds. */
function drain(ctx: Context, maxBytes: number): Promise<boolean> {
  const req = ctx.req;
  if (req.complete || req.readableEnded) return Promise.resolve(true);
  return new Promise((resolve) => {
    let received = 0;
    const finish = (ended: boolean) => {
      clearTimeout(timer);
      req.off("data", onData);
      req.off("readable", onReadable);
      req.off("end", onEnd);
      req.off("close", onAbort);
      req.off("error", onAbort);
      if (!ended) req.pause();
      resolve(ended);
    };
    const onData = (chunk: Buffer) => {
      received += chunk.length;
      if (received > 2 * maxBytes) finish(false);
    };
    // A reader that iterated the body (an upload's form) left it in paused mode with a 'readable'
    // listener, where resume() does not make it flow: read what arrives (each read is a 'data' event).
    const onReadable = () => {
      while (req.read() !== null);
    };
    const onEnd = () => finish(true);
    const onAbort = () => finish(false);
    const timer = setTimeout(onAbort, DRAIN_MAX_MS);
    req.on("data", onData);
    req.on("readable", onReadable);
    req.on("end", onEnd);
    req.on("close", onAbort);
    req.on("error", onAbort);
    req.resume();
    onReadable();
  });
}

/** The body of the request as parsed JSON (undefined when it is not JSON), read at most once. */
export async function requestBody(ctx: Context, limits?: BodyLimits): Promise<unknown> {
  const reader = stateOf(ctx).bodyReader;
  if (!reader) throw new Error("requestBodies() is not installed in this app");
  return reader.read(limits);
}

/** The answer to a body that is refused before it was read to its end: the connection closes after it. */
function refusedMidBody(error: ApiError): ApiError {
  return new ApiError(error.status, error.type, error.message, { code: error.code, param: error.param, headers: { ...error.headers, connection: "close" } });
}

function tooLarge(maxBytes: number): ApiError {
  return refusedMidBody(
    new ApiError(413, "invalid_request_error", `The request body is too large (more than ${maxBytes} bytes).`, { code: "request_too_large" }),
  );
}

/** A public route's body not received whole within its deadline (dripped a byte at a time): 408, the connection closed. */
function bodyTooSlow(deadlineMs: number): ApiError {
  return refusedMidBody(new ApiError(408, "invalid_request_error", `The request body was not received within ${deadlineMs} ms.`, { code: "request_timeout" }));
}

/** A body that stopped arriving (a stalled or slow-loris client): 408, and the connection closes after the answer. */
export function bodyStalled(idleMs: number): ApiError {
  return refusedMidBody(
    new ApiError(408, "invalid_request_error", `The request body stopped arriving: nothing was received for ${idleMs} ms.`, { code: "request_timeout" }),
  );
}

/** A body that does not open an object or array: valid JSON of another kind (`null`, a number) says so, anything else is not JSON. */
function scalarOrInvalid(text: string): InvalidRequestError {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return invalidJson();
  }
  const kind = value === null ? "null" : typeof value;
  return new InvalidRequestError(`The request body must be a JSON object; it is valid JSON, but ${kind === "null" ? "null" : `a ${kind}`}.`, {
    code: "invalid_json",
  });
}

function invalidJson(): InvalidRequestError {
  return new InvalidRequestError("We could not parse the JSON body of your request. The body must be valid JSON (Content-Type: application/json).", {
    code: "invalid_json",
  });
}

async function readJsonBody(
  ctx: Context,
  { maxBytes, shape, idleMs, deadlineMs }: { maxBytes: number; shape: JsonShapeLimits | undefined; idleMs: number; deadlineMs: number | undefined },
): Promise<unknown> {
  if (!PARSED_METHODS.has(ctx.method) || !ctx.is(JSON_TYPES)) return undefined;
  const encoding = ctx.get("content-encoding").toLowerCase();
  if (encoding !== "" && encoding !== "identity") {
    throw refusedMidBody(
      new ApiError(415, "invalid_request_error", "Unsupported Content-Encoding; send the JSON body uncompressed.", { code: "unsupported_media_type" }),
    );
  }
  const declared = ctx.request.length;
  if (declared !== undefined && declared > maxBytes) throw tooLarge(maxBytes);
  const { chunks, received } = await receive(ctx, { maxBytes, idleMs, deadlineMs }, new JsonShapeScanner(shape ?? DEFAULT_JSON_SHAPE_LIMITS));
  // A leading byte order mark is ignored (RFC 8259 allows it; a batch file's lines are read that way too).
  const decoded = Buffer.concat(chunks, received).toString("utf8");
  const text = decoded.charCodeAt(0) === 0xfeff ? decoded.slice(1) : decoded;
  const first = text.trimStart()[0];
  if (first === undefined) return {};
  if (first !== "{" && first !== "[") throw scalarOrInvalid(text);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text) as unknown;
  } catch {
    throw invalidJson();
  }
  // A key `__proto__` (also written with escapes) is an own member after JSON.parse, but assigning it
  // anywhere later sets a prototype instead: zod, records and spreads drop it silently. Refused, naming
  // its place; looked for only in a body whose text mentions "proto" at all.
  if (text.includes("proto") || text.includes("\\u")) {
    const at = protoKeyPath(parsed);
    if (at !== null) {
      throw new InvalidRequestError(`A JSON key named '__proto__' is not accepted${at ? ` (in '${at}')` : ""}.`, { param: at || null, code: "invalid_value" });
    }
  }
  return parsed;
}

/** The place of the first object with an own `__proto__` key ("" for the body itself), or null. Iterative. */
function protoKeyPath(value: unknown): string | null {
  const stack: { value: unknown; path: string }[] = [{ value, path: "" }];
  for (let at = stack.pop(); at; at = stack.pop()) {
    const current = at.value;
    if (current === null || typeof current !== "object") continue;
    if (Array.isArray(current)) {
      for (let i = current.length - 1; i >= 0; i--) stack.push({ value: current[i], path: `${at.path}[${i}]` });
      continue;
    }
    if (Object.hasOwn(current, "__proto__")) return at.path;
    const keys = Object.keys(current);
    for (let i = keys.length - 1; i >= 0; i--)
      stack.push({ value: (current as Record<string, unknown>)[keys[i]!], path: at.path ? `${at.path}.${keys[i]}` : keys[i]! });
  }
  return null;
}

/**
 * The body's bytes, each chunk scanned as it arrives. Stops listening at the first refusal without
 * destroying the request (its answer still has to go out on that socket; `Connection: close` ends it),
 * also when nothing arrived for `idleMs`, or the whole body not within `deadlineMs` (if given).
 */
function receive(
  ctx: Context,
  { maxBytes, idleMs, deadlineMs }: { maxBytes: number; idleMs: number; deadlineMs: number | undefined },
  scanner: JsonShapeScanner,
): Promise<{ chunks: Buffer[]; received: number }> {
  const req = ctx.req;
  inviteBody(ctx);
  // The client went away before the body was asked for (a slow key check, say): its close came and went,
  // and nothing more will arrive. Fail now, not after idleMs.
  if (req.destroyed && !req.readableEnded) {
    return Promise.reject(refusedMidBody(new InvalidRequestError("The request body was not received completely.", { code: "incomplete_body" })));
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let received = 0;
    // Checked twice a period (not a timer re-armed per chunk): three checks in a row with nothing new,
    // a silence of idleMs to 1.5 idleMs, fail it.
    let silentChecks = 0;
    const idle = setInterval(() => {
      silentChecks += 1;
      if (silentChecks >= 3) fail(bodyStalled(idleMs));
    }, idleMs / 2);
    const deadline = deadlineMs === undefined ? undefined : setTimeout(() => fail(bodyTooSlow(deadlineMs)), deadlineMs);
    const stop = () => {
      clearInterval(idle);
      clearTimeout(deadline);
      req.off("data", onData);
      req.off("end", onEnd);
      req.off("error", onError);
      req.off("close", onClose);
      req.pause();
    };
    const fail = (error: ApiError) => {
      stop();
      reject(error);
    };
    const onData = (chunk: Buffer) => {
      silentChecks = 0;
      received += chunk.length;
      if (received > maxBytes) return fail(tooLarge(maxBytes));
      const problem = scanner.push(chunk);
      if (problem !== null) return fail(refusedMidBody(new InvalidRequestError(`Invalid request body: ${problem}`, { code: "request_too_complex" })));
      chunks.push(chunk);
    };
    const onEnd = () => {
      stop();
      resolve({ chunks, received });
    };
    const onError = (error?: NodeJS.ErrnoException) => {
      // The HTTP parser refused the body (a broken chunk): it answers 400 itself; the request's access
      // line and metrics say so (not 499: the client did not leave).
      if (error?.code?.startsWith("HPE_")) markParserRefusal(req.socket, 400);
      fail(refusedMidBody(new InvalidRequestError("The request body was not received completely.", { code: "incomplete_body" })));
    };
    const onClose = () => {
      if (!req.complete) onError();
    };
    req.on("data", onData);
    req.on("end", onEnd);
    req.on("error", onError);
    req.on("close", onClose);
  });
}
