import type { Context } from "koa";
import { KNOWN_DEVICE_TTL_SECONDS } from "./knownLoginDevices.ts";

/**
 * The cookie a login leaves on its client (KnownLoginDevices): HttpOnly, SameSite=Strict, sent back to
 * the login routes only. Over HTTPS `__Host-login_device` (Secure, no Domain), else `login_device`.
 */
const COOKIE = "login_device";
const SECURE_COOKIE = "__Host-login_device";

const cookieName = (ctx: Context) => (ctx.secure ? SECURE_COOKIE : COOKIE);

/** The device token the client sent, if any (its form is checked where it is looked up). */
export function readLoginDeviceCookie(ctx: Context): string | null {
  return ctx.cookies.get(cookieName(ctx)) ?? null;
}

export function setLoginDeviceCookie(ctx: Context, token: string): void {
  ctx.cookies.set(cookieName(ctx), token, {
    httpOnly: true,
    sameSite: "strict",
    secure: ctx.secure,
    path: "/",
    maxAge: KNOWN_DEVICE_TTL_SECONDS * 1000,
    overwrite: true,
  });
}
