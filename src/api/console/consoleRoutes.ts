import Router from "@koa/router";
import type { Context } from "koa";
import { findAccount } from "../accounts/findAccount.ts";
import { accountView } from "../accounts/accountView.ts";
import { LoginBodySchema } from "../accounts/accountSchemas.ts";
import type { AppDeps } from "../appDeps.ts";
import { PUBLIC_BODY_LIMITS } from "../http/requestBody.ts";
import { validate, validated } from "../http/validate.ts";
import { AccountNotFoundError } from "../../ledger/domainError.ts";
import { sessionAuth, sessionOf } from "../sessions/sessionAuth.ts";
import { clearSessionCookie, csrfTokenFor, setSessionCookie } from "../sessions/sessionCookie.ts";
import { revokeSession } from "../sessions/sessionStore.ts";
import { loadConsoleAssets, type ConsoleAsset } from "./consoleAssets.ts";
import { consoleModels } from "./consoleModels.ts";
import { readLoginDeviceCookie, setLoginDeviceCookie } from "../accounts/loginDeviceCookie.ts";

/** The console's pages: one HTML document; the script shows the page the path names. */
export const CONSOLE_PAGES = ["/", "/login", "/signup", "/account", "/usage", "/models", "/playground", "/batches"];

function sendAsset(ctx: Context, file: ConsoleAsset, csp: string): void {
  ctx.set("content-security-policy", csp);
  ctx.set("x-content-type-options", "nosniff");
  ctx.set("referrer-policy", "no-referrer");
  ctx.set("cache-control", "no-cache");
  ctx.set("etag", file.etag);
  if (ctx.get("if-none-match") === file.etag) {
    ctx.status = 304;
    return;
  }
  ctx.type = file.contentType;
  ctx.body = file.body;
}

/**
 * The web console, same origin as the API: its page and assets (GET/HEAD only), and its session
 * endpoints. Logging in here puts the session token in an HttpOnly, SameSite=Strict cookie and answers
 * the CSRF token the page sends back on state-changing calls; every other call the page makes goes to
 * the ordinary session routes (/api/v1/accounts/...), which accept that cookie.
 */
export function consoleRoutes(deps: AppDeps): Router {
  const assets = loadConsoleAssets();
  const router = new Router({ sensitive: true });
  const requireSession = sessionAuth(deps);

  router.get(CONSOLE_PAGES, (ctx) => sendAsset(ctx, assets.page, assets.contentSecurityPolicy));
  router.get(["/console/app/:file", "/console/vendor/:file"], async (ctx, next) => {
    const file = assets.files.get(ctx.path);
    if (!file) return next();
    sendAsset(ctx, file, assets.contentSecurityPolicy);
  });

  router.post("/console/session", validate(LoginBodySchema, "body", PUBLIC_BODY_LIMITS), async (ctx) => {
    const session = await deps.signIn.login(deps, validated(ctx, LoginBodySchema), ctx.ip, readLoginDeviceCookie(ctx));
    setSessionCookie(ctx, session.sessionToken, session.expiresAt);
    if (session.deviceToken !== null) setLoginDeviceCookie(ctx, session.deviceToken);
    ctx.set("cache-control", "no-store");
    ctx.body = { csrf_token: csrfTokenFor(session.sessionToken), expires_at: session.expiresAt.toISOString() };
  });

  router.get("/console/session", requireSession, async (ctx) => {
    const session = sessionOf(ctx);
    const account = await findAccount(deps.pool, { accountId: session.accountId });
    if (!account) throw new AccountNotFoundError();
    ctx.set("cache-control", "no-store");
    ctx.body = { csrf_token: csrfTokenFor(session.sessionToken), account: accountView(account) };
  });

  router.delete("/console/session", requireSession, async (ctx) => {
    const session = sessionOf(ctx);
    await revokeSession(deps.pool, session.sessionToken, deps.clock.now());
    clearSessionCookie(ctx);
    ctx.status = 204;
  });

  router.get("/console/models", requireSession, async (ctx) => {
    ctx.set("cache-control", "no-store");
    ctx.body = { object: "list", data: await consoleModels(deps) };
  });

  return router;
}
