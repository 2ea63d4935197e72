import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { Context } from "koa";
import { stateOf } from "./requestState.ts";

/**
 * `Expect: 100-continue`: Node answers `100 Continue` at once unless the server listens for
 * `checkContinue`, which invites the body of every request, a refused one's too. Here the request is
 * handled as any other, and its body is invited only when a route reads it (inviteBody), after the
 * route's key or session check: a refused client is answered without having sent its body.
 */
export function inviteBodiesOnlyWhenRead(server: Server, handle: (req: IncomingMessage, res: ServerResponse) => void): void {
  server.on("checkContinue", handle);
}

function expectsContinue(ctx: Context): boolean {
  return (ctx.req.headers.expect ?? "").toLowerCase() === "100-continue";
}

/** Sends `100 Continue` before a body is read, once, when the client waits for it. */
export function inviteBody(ctx: Context): void {
  if (!expectsContinue(ctx)) return;
  const state = stateOf(ctx);
  if (state.bodyInvited || ctx.res.headersSent) return;
  state.bodyInvited = true;
  ctx.res.writeContinue();
}

/** Whether the client holds its body back, waiting for an invitation that never came (nothing to drain). */
export function bodyHeldBack(ctx: Context): boolean {
  return expectsContinue(ctx) && !stateOf(ctx).bodyInvited;
}
