import type { Context, Next } from "koa";
import type { AppDeps } from "../appDeps.ts";
import { bearerToken } from "../http/bearerToken.ts";
import { ApiError, AuthenticationError } from "../http/errors.ts";
import { requiredState, type SessionState, stateOf } from "../http/requestState.ts";
import { findSession } from "./sessionStore.ts";
import { CSRF_HEADER, csrfTokenCheck, readSessionCookie } from "./sessionCookie.ts";

export type { SessionState };

/** A cookie-authenticated state-changing call without the session's CSRF token. */
export class CsrfTokenError extends ApiError {
  constructor() {
    super(403, "permission_error", `Missing or invalid CSRF token: send the console's token in the ${CSRF_HEADER} header.`, { code: "invalid_csrf_token" });
  }
}

/**
 * Key-management and account routes: `Authorization: Bearer <SESSION_TOKEN>` (scripts), or the web
 * console's HttpOnly session cookie, which on state-changing methods also needs the CSRF header (403
 * without it), and whose CSRF header, where sent, must be its session's (401 `session_replaced` if it is
 * another's). Sets the session (read with sessionOf); 401 authentication_error without a valid session.
 */
export function sessionAuth(deps: Pick<AppDeps, "pool" | "clock" | "config">) {
  return async function requireSession(ctx: Context, next: Next): Promise<void> {
    const bearer = bearerToken(ctx);
    const token = bearer ?? readSessionCookie(ctx);
    if (!token) throw new AuthenticationError("Missing session token: send `Authorization: Bearer <SESSION_TOKEN>`.", "missing_session");
    const via = bearer ? "bearer" : "cookie";
    const csrf = via === "cookie" ? csrfTokenCheck(ctx, token) : "accepted";
    if (csrf === "missing") throw new CsrfTokenError();
    if (csrf === "other") {
      throw new AuthenticationError(
        "This page's session was replaced by another login in this browser (its cookie now opens another session). Log in again.",
        "session_replaced",
      );
    }
    const session = await findSession(deps.pool, token, deps.clock.now(), deps.config.sessionIdleMs);
    if (!session) throw new AuthenticationError("Invalid or expired session token. Log in again.", "invalid_session");
    stateOf(ctx).session = { accountId: session.accountId, sessionToken: token, via } satisfies SessionState;
    await next();
  };
}

/** The session of a route mounted after sessionAuth. */
export function sessionOf(ctx: Context): SessionState {
  return requiredState(ctx, "session");
}
