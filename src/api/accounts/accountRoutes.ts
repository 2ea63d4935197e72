import Router from "@koa/router";
import type { AppDeps } from "../appDeps.ts";
import { requestMetadata } from "../http/requestMetadata.ts";
import { PUBLIC_BODY_LIMITS } from "../http/requestBody.ts";
import { validate, validated } from "../http/validate.ts";
import { sessionAuth, sessionOf } from "../sessions/sessionAuth.ts";
import { revokeSession } from "../sessions/sessionStore.ts";
import { LoginBodySchema, RegisterBodySchema } from "./accountSchemas.ts";
import { accountView } from "./accountView.ts";
import { readLoginDeviceCookie, setLoginDeviceCookie } from "./loginDeviceCookie.ts";
import { AccountNotFoundError } from "../../ledger/domainError.ts";
import { findAccount } from "./findAccount.ts";
import { registerAccount } from "./registerAccount.ts";
import { currentPeriodFigures } from "../../ledger/budget/currentPeriodFigures.ts";
import { clearSessionCookie, readSessionCookie } from "../sessions/sessionCookie.ts";

/**
 * How a session token is obtained (the spec leaves it open): register, log in, log out, and the
 * account's own view. Session routes take `Authorization: Bearer <SESSION_TOKEN>`.
 */
export function accountRoutes(deps: AppDeps): Router {
  const router = new Router({ prefix: "/api/v1/accounts", sensitive: true });
  const requireSession = sessionAuth(deps);
  const { gate, throttle } = deps.signIn;

  router.post("/register", validate(RegisterBodySchema, "body", PUBLIC_BODY_LIMITS), async (ctx) => {
    const body = validated(ctx, RegisterBodySchema);
    await throttle.beforeRegistration(ctx.ip);
    const account = await registerAccount(deps, { gate, clientAddress: ctx.ip }, body, requestMetadata(ctx));
    ctx.status = 201;
    ctx.body = { id: account.accountId, email: account.email, created_at: account.createdAt.toISOString() };
  });

  router.post("/login", validate(LoginBodySchema, "body", PUBLIC_BODY_LIMITS), async (ctx) => {
    const body = validated(ctx, LoginBodySchema);
    const session = await deps.signIn.login(deps, body, ctx.ip, readLoginDeviceCookie(ctx));
    if (session.deviceToken !== null) setLoginDeviceCookie(ctx, session.deviceToken);
    ctx.set("cache-control", "no-store");
    ctx.body = { session_token: session.sessionToken, expires_at: session.expiresAt.toISOString() };
  });

  router.post("/logout", requireSession, async (ctx) => {
    const session = sessionOf(ctx);
    await revokeSession(deps.pool, session.sessionToken, deps.clock.now());
    // Called with the console's cookie (that session): the cookie goes too, as the console's logout clears it.
    if (readSessionCookie(ctx) === session.sessionToken) clearSessionCookie(ctx);
    ctx.status = 204;
  });

  router.get("/user", requireSession, async (ctx) => {
    const session = sessionOf(ctx);
    const account = await findAccount(deps.pool, { accountId: session.accountId });
    if (!account) throw new AccountNotFoundError();
    ctx.set("cache-control", "no-store");
    // The current billing period's budget, spent, held and remaining (usage slice).
    ctx.body = { ...accountView(account), current_period: await currentPeriodFigures(deps.pool, session.accountId, deps.clock.now()) };
  });

  return router;
}
