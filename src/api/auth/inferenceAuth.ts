import type { Context, Next } from "koa";
import type { AppDeps } from "../appDeps.ts";
import { bearerToken } from "../http/bearerToken.ts";
import { ForbiddenError, SubscriptionRequiredError } from "../http/errors.ts";
import { isWellFormedApiKey } from "../keys/apiKeySecret.ts";

/** Who an inference request acts for; set on ctx.state.principal by inferenceAuth. */
export type Principal = { accountId: string; keyId: string };

/**
 * `Authorization: Bearer <API_KEY>` for the inference API. Missing, malformed (checksum), unknown or
 * revoked key -> 403 Forbidden; account without an active subscription -> 402 subscription_required.
 * A malformed key never reaches the database. Records the key's use in the last-used batch.
 */
export function inferenceAuth(deps: Pick<AppDeps, "keyAuth" | "clock">) {
  return async function requireApiKey(ctx: Context, next: Next): Promise<void> {
    const secret = bearerToken(ctx);
    if (!secret) throw new ForbiddenError("Missing API key: send `Authorization: Bearer <API_KEY>`.", "missing_api_key");
    if (!isWellFormedApiKey(secret)) throw new ForbiddenError();
    const result = await deps.keyAuth.authenticate(secret);
    if (result.outcome === "forbidden") throw new ForbiddenError();
    if (result.outcome === "subscription_required") throw new SubscriptionRequiredError();
    ctx.state.principal = { accountId: result.principal.accountId, keyId: result.principal.keyId } satisfies Principal;
    deps.keyAuth.lastUsed.record(result.principal.keyId, deps.clock.now());
    await next();
  };
}
