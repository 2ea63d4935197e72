import { recentlyValidKeysOf } from "./recentlyValidKeys.ts";
import { randomUUID } from "node:crypto";
import Router from "@koa/router";
import type { Context, Next } from "koa";
import { KeyNotFoundError } from "../../ledger/domainError.ts";
import { executeAccountCommand } from "../../ledger/accounts/executeAccountCommand.ts";
import type { AppDeps } from "../appDeps.ts";
import { requestMetadata } from "../http/requestMetadata.ts";
import { validate, validated } from "../http/validate.ts";
import { sessionAuth, sessionOf } from "../sessions/sessionAuth.ts";
import { CreateKeyBodySchema, KeyIdSchema, RenameKeyBodySchema } from "./apiKeySchemas.ts";
import { apiKeyHash, apiKeyLast4, newApiKeySecret } from "./apiKeySecret.ts";
import { apiKeyView, type ApiKeyView } from "./apiKeyView.ts";
import { findKeyRows } from "./findKeyRows.ts";
import { keyUsageStats } from "./keyUsageStats.ts";
import { stateOf, requiredState } from "../http/requestState.ts";

/** Key-management views of the account's keys, with their usage stats (read through keyUsageStats only). */
async function keyViews(deps: AppDeps, accountId: string, keyId?: string): Promise<ApiKeyView[]> {
  const rows = await findKeyRows(deps.pool, accountId, keyId);
  const usage = await keyUsageStats(
    deps.pool,
    rows.map((r) => r.keyId),
    deps.clock.now(),
  );
  return rows.map((row) => apiKeyView(row, usage.get(row.keyId)!));
}

async function keyView(deps: AppDeps, accountId: string, keyId: string): Promise<ApiKeyView> {
  const [view] = await keyViews(deps, accountId, keyId);
  if (!view) throw new KeyNotFoundError(keyId);
  return view;
}

/** `:keyId` -> the keyId of the request state (requiredState); a malformed id is answered like an unknown one (404). */
async function requireKeyId(ctx: Context, next: Next): Promise<void> {
  const raw = String((ctx as { params?: Record<string, string> }).params?.keyId ?? "");
  const parsed = KeyIdSchema.safeParse(raw);
  if (!parsed.success) throw new KeyNotFoundError(raw.slice(0, 64));
  stateOf(ctx).keyId = parsed.data;
  await next();
}

const accountOf = (ctx: Context) => sessionOf(ctx).accountId;
const actorOf = (accountId: string) => `account:${accountId}`;

/**
 * The five key-management endpoints (spec 4.6), session-authenticated. Paths are registered without
 * the trailing slash; the router accepts them with or without it. The full secret appears only in the
 * create response.
 */
export function apiKeyRoutes(deps: AppDeps): Router {
  const router = new Router({ prefix: "/api/v1/accounts/user/api-keys", sensitive: true });
  const requireSession = sessionAuth(deps);

  router.get("/", requireSession, async (ctx) => {
    ctx.set("cache-control", "no-store");
    ctx.body = { object: "list", data: await keyViews(deps, accountOf(ctx)) };
  });

  const recentlyValid = recentlyValidKeysOf(deps);
  router.post("/create", requireSession, validate(CreateKeyBodySchema), async (ctx) => {
    const accountId = accountOf(ctx);
    const { name } = validated(ctx, CreateKeyBodySchema);
    const secret = newApiKeySecret();
    const keyId = randomUUID();
    await executeAccountCommand(
      deps.accounts,
      accountId,
      { type: "CreateKey", keyId, name, keyHash: apiKeyHash(secret), last4: apiKeyLast4(secret), now: deps.clock.now() },
      requestMetadata(ctx, actorOf(accountId)),
    );
    // Valid from its first request on, also from an address blocked for trying made-up keys.
    recentlyValid.mark(secret);
    const { id, name: storedName, masked_key, ...rest } = await keyView(deps, accountId, keyId);
    ctx.status = 201;
    ctx.set("cache-control", "no-store");
    ctx.body = { id, name: storedName, key: secret, masked_key, ...rest };
  });

  router.get("/:keyId", requireSession, requireKeyId, async (ctx) => {
    ctx.set("cache-control", "no-store");
    ctx.body = await keyView(deps, accountOf(ctx), requiredState(ctx, "keyId"));
  });

  router.patch("/:keyId/update", requireSession, requireKeyId, validate(RenameKeyBodySchema), async (ctx) => {
    const accountId = accountOf(ctx);
    const keyId = requiredState(ctx, "keyId");
    const { name } = validated(ctx, RenameKeyBodySchema);
    await executeAccountCommand(deps.accounts, accountId, { type: "RenameKey", keyId, name, now: deps.clock.now() }, requestMetadata(ctx, actorOf(accountId)));
    ctx.body = await keyView(deps, accountId, keyId);
  });

  router.post("/:keyId/revoke", requireSession, requireKeyId, async (ctx) => {
    const accountId = accountOf(ctx);
    const keyId = requiredState(ctx, "keyId");
    await executeAccountCommand(deps.accounts, accountId, { type: "RevokeKey", keyId, now: deps.clock.now() }, requestMetadata(ctx, actorOf(accountId)));
    ctx.body = await keyView(deps, accountId, keyId);
  });

  return router;
}
