import type { Context } from "koa";

/** The token of an `Authorization: Bearer <token>` header, or null. */
export function bearerToken(ctx: Context): string | null {
  const header = ctx.get("authorization");
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match ? match[1]! : null;
}
