import { createHash, timingSafeEqual } from "node:crypto";
import type { Context } from "koa";

/**
 * The web console's session cookie: the same session token as the Bearer one, kept HttpOnly and
 * SameSite=Strict. Over HTTPS (the connection's, or a trusted proxy's X-Forwarded-Proto: TRUST_PROXY_HOPS)
 * it is `__Host-console_session`, Secure, Path=/ and without a Domain: the browser then takes it only
 * from this very origin over HTTPS, so a sibling subdomain or a plain-HTTP page cannot plant a session of
 * its own (a login CSRF); over plain HTTP (a local deployment) it is `console_session`.
 */
export const SESSION_COOKIE = "console_session";
export const SECURE_SESSION_COOKIE = "__Host-console_session";

/** The header the console sends its CSRF token in on every state-changing call made with the cookie. */
export const CSRF_HEADER = "x-csrf-token";

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

/**
 * The CSRF token of a session: derived from the session token (which page scripts never see: the cookie
 * is HttpOnly), so another site can neither read nor compute it, and nothing more has to be stored.
 */
export function csrfTokenFor(sessionToken: string): string {
  return createHash("sha256").update(`csrf:${sessionToken}`).digest("base64url");
}

/** The session cookie's name on this request: the `__Host-` one over HTTPS. */
function cookieName(ctx: Context): string {
  return ctx.secure ? SECURE_SESSION_COOKIE : SESSION_COOKIE;
}

/** The session token of the request's cookie; over HTTPS only the `__Host-` cookie counts. */
export function readSessionCookie(ctx: Context): string | null {
  const value = ctx.cookies.get(cookieName(ctx));
  return value && /^sess_[A-Za-z0-9_-]{1,100}$/.test(value) ? value : null;
}

export function setSessionCookie(ctx: Context, token: string, expiresAt: Date): void {
  ctx.cookies.set(cookieName(ctx), token, { httpOnly: true, sameSite: "strict", secure: ctx.secure, path: "/", expires: expiresAt, overwrite: true });
}

export function clearSessionCookie(ctx: Context): void {
  ctx.cookies.set(cookieName(ctx), "", { httpOnly: true, sameSite: "strict", secure: ctx.secure, path: "/", expires: new Date(0), overwrite: true });
}

/**
 * What the CSRF header of a cookie-authenticated request says: `accepted` (the session's token; or none on
 * a safe method), `missing` (none on a state-changing method), or `other` (the token of another session:
 * a console page loaded before someone logged in to another account in the same browser, whose cookie
 * it now carries; the page sends its token on every call so this is noticed before it shows anything).
 */
export function csrfTokenCheck(ctx: Context, sessionToken: string): "accepted" | "missing" | "other" {
  const header = ctx.get(CSRF_HEADER);
  if (header === "") return SAFE_METHODS.has(ctx.method) ? "accepted" : "missing";
  const sent = Buffer.from(header);
  const expected = Buffer.from(csrfTokenFor(sessionToken));
  return sent.length === expected.length && timingSafeEqual(sent, expected) ? "accepted" : "other";
}
