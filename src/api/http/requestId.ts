import { randomUUID } from "node:crypto";
import type { Context, Next } from "koa";
import { stateOf } from "./requestState.ts";
import { setHeader } from "./responseHeaders.ts";

/** An incoming `x-request-id` is kept only when it looks like an id (a proxy's), never arbitrary text. */
const ACCEPTED_REQUEST_ID = /^[A-Za-z0-9._:-]{8,128}$/;

/**
 * Gives every request an id: ctx.state.requestId, echoed as `x-request-id` (on errors too: mount it
 * before the error handler). It is the correlationId of the events the request appends.
 */
export function requestId() {
  return async function assignRequestId(ctx: Context, next: Next): Promise<void> {
    const incoming = ctx.get("x-request-id");
    const id = ACCEPTED_REQUEST_ID.test(incoming) ? incoming : randomUUID();
    stateOf(ctx).requestId = id;
    setHeader(ctx, "x-request-id", id);
    await next();
  };
}
