import { createHash, timingSafeEqual } from "node:crypto";
import type { Context, Next } from "koa";
import type { AppDeps } from "../appDeps.ts";
import { bearerToken } from "../http/bearerToken.ts";
import { ForbiddenError } from "../http/errors.ts";

export class AdminForbiddenError extends ForbiddenError {
  constructor() {
    super("Missing or invalid admin token: send `Authorization: Bearer <ADMIN_TOKEN>`.", "invalid_admin_token");
  }
}

const digest = (value: string) => createHash("sha256").update(value).digest();

/**
 * Operator routes: `Authorization: Bearer <ADMIN_TOKEN>`, compared in constant time (over SHA-256
 * digests, so the length of the secret does not show either). No ADMIN_TOKEN configured: everyone is
 * refused. Always 403 Forbidden.
 */
export function adminAuth(deps: Pick<AppDeps, "config">) {
  const expected = deps.config.adminToken === undefined ? null : digest(deps.config.adminToken);
  return async function requireAdmin(ctx: Context, next: Next): Promise<void> {
    const token = bearerToken(ctx);
    const given = digest(token ?? "");
    const ok = expected !== null && token !== null && timingSafeEqual(given, expected);
    if (!ok) throw new AdminForbiddenError();
    await next();
  };
}
