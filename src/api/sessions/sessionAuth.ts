import type { Context, Next } from "koa";
import type { AppDeps } from "../appDeps.ts";
import { bearerToken } from "../http/bearerToken.ts";
import { AuthenticationError } from "../http/errors.ts";
import { findSession } from "./sessionStore.ts";

export type SessionState = { accountId: string; sessionToken: string };

/**
 * Key-management and account routes: `Authorization: Bearer <SESSION_TOKEN>`. Sets
 * ctx.state.session = { accountId, sessionToken }; 401 authentication_error otherwise.
 */
export function sessionAuth(deps: Pick<AppDeps, "pool" | "clock">) {
  return async function requireSession(ctx: Context, next: Next): Promise<void> {
    const token = bearerToken(ctx);
    if (!token) throw new AuthenticationError("Missing session token: send `Authorization: Bearer <SESSION_TOKEN>`.", "missing_session");
    const session = await findSession(deps.pool, token, deps.clock.now());
    if (!session) throw new AuthenticationError("Invalid or expired session token. Log in again.", "invalid_session");
    ctx.state.session = { accountId: session.accountId, sessionToken: token } satisfies SessionState;
    await next();
  };
}
