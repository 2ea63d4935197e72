import { randomUUID } from "node:crypto";
import type { Context, Next } from "koa";
import { stateOf } from "./requestState.ts";
import { setHeader } from "./responseHeaders.ts";

/** An incoming `x-request-id` is kept only when it looks like an id (a proxy's), never arbitrary text. */
const ACCEPTED_REQUEST_ID = /^[A-Za-z0-9._:-]{8,128}$/;
/**
 * Nor when it has the shape of one of the platform's secrets (an API key, a session token): the id is
 * logged, traced and stored with the request's events, where no secret may go, even one a client sent
 * by mistake.
 */
const SECRET_SHAPED = /^(sk-|sess_)/i;

/**
 * Gives every request an id: ctx.state.requestId, echoed as `x-request-id` (on errors too: mount it
 * before the error handler). It is the correlationId of the events the request appends.
 */
export function requestId() {
  return async function assignRequestId(ctx: Context, next: Next): Promise<void> {
    const incoming = ctx.get("x-request-id");
    const id = ACCEPTED_REQUEST_ID.test(incoming) && !SECRET_SHAPED.test(incoming) ? incoming : randomUUID();
    stateOf(ctx).requestId = id;
    setHeader(ctx, "x-request-id", id);
    await next();
  };
}
