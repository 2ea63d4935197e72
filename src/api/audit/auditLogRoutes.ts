import Router from "@koa/router";
import type { Context } from "koa";
import { z } from "zod";
import { readAccountCheckpointProofs, readExportHorizon } from "../../ledger/audit/accountCheckpointProofs.ts";
import { AUDIT_CSV_HEADER, auditCsvLine, decodeAuditCursor, encodeAuditCursor, readAuditLog } from "../../ledger/audit/auditLog.ts";
import type { AppDeps } from "../appDeps.ts";
import { InvalidRequestError } from "../http/errors.ts";
import { validate, validated } from "../http/validate.ts";
import { sessionAuth, sessionOf } from "../sessions/sessionAuth.ts";

export const AuditLogQuerySchema = z
  .object({
    cursor: z.string().max(200).optional(),
    limit: z.coerce.number().int().min(1).max(1000).default(100),
    format: z.enum(["json", "csv"]).optional(),
  })
  .strict();
type AuditLogQuery = z.infer<typeof AuditLogQuerySchema>;

/** `format=` wins; otherwise an Accept that prefers text/csv over JSON gets CSV. */
function wantsCsv(ctx: Context, query: AuditLogQuery): boolean {
  if (query.format) return query.format === "csv";
  return ctx.accepts("application/json", "text/csv") === "text/csv";
}

/**
 * `GET /api/v1/accounts/user/audit-log` (session): the caller's own account history with each event's
 * hashes (docs/audit.md), in log order, `limit` per page (default 100, at most 1000). JSON:
 * `{object: "list", data, has_more, next_cursor}`, and on the last page `checkpoints` (the signed
 * checkpoints covering the account, readAccountCheckpointProofs); CSV (format=csv or Accept: text/csv): a header line,
 * one line per event, the next page's cursor in the `x-next-cursor` header.
 */
export function auditLogRoutes(deps: AppDeps): Router {
  const router = new Router({ prefix: "/api/v1/accounts/user", sensitive: true });
  router.get(["/audit-log", "/audit-log/"], sessionAuth(deps), validate(AuditLogQuerySchema, "query"), async (ctx) => {
    const session = sessionOf(ctx);
    const query = validated(ctx, AuditLogQuerySchema);
    const after = query.cursor === undefined ? null : decodeAuditCursor(query.cursor);
    if (query.cursor !== undefined && !after)
      throw new InvalidRequestError("cursor is not a cursor this API returned", { param: "cursor", code: "invalid_cursor" });
    const horizon = await readExportHorizon(deps.pool);
    const page = await readAuditLog(deps.pool, session.accountId, after, query.limit);
    const nextCursor = page.next ? encodeAuditCursor(page.next) : null;
    ctx.set("cache-control", "no-store");
    if (wantsCsv(ctx, query)) {
      if (nextCursor) ctx.set("x-next-cursor", nextCursor);
      ctx.type = "text/csv; charset=utf-8";
      ctx.body = AUDIT_CSV_HEADER + page.entries.map(auditCsvLine).join("");
      return;
    }
    // The last page carries the signed checkpoints covering the account (proofs of its own streams only).
    const checkpoints = nextCursor ? undefined : await readAccountCheckpointProofs(deps.pool, session.accountId, horizon);
    ctx.body = { object: "list", data: page.entries, has_more: nextCursor !== null, next_cursor: nextCursor, ...(checkpoints ? { checkpoints } : {}) };
  });
  return router;
}
