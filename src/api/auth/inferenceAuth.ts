import type { Context, Next } from "koa";
import type { AppDeps } from "../appDeps.ts";
import { bearerToken } from "../http/bearerToken.ts";
import { type ApiError, ForbiddenError, SubscriptionRequiredError } from "../http/errors.ts";
import type { AuthRefusalReason } from "../../observability/metrics.ts";
import { isWellFormedApiKey } from "../keys/apiKeySecret.ts";

/** Who an inference request acts for; set on ctx.state.principal by inferenceAuth. */
export type Principal = { accountId: string; keyId: string };

/**
 * `Authorization: Bearer <API_KEY>` for the inference API. Missing, malformed (checksum), unknown or
 * revoked key -> 403 Forbidden; account without an active subscription -> 402 subscription_required.
 * A malformed key never reaches the database. Records the key's use in the last-used batch.
 */
export function inferenceAuth(deps: Pick<AppDeps, "keyAuth" | "clock" | "metrics">) {
  const refuse = (reason: AuthRefusalReason, error: ApiError): never => {
    deps.metrics.auth.refusals.inc({ reason });
    throw error;
  };
  return async function requireApiKey(ctx: Context, next: Next): Promise<void> {
    const secret = bearerToken(ctx);
    if (!secret) return refuse("missing_api_key", new ForbiddenError("Missing API key: send `Authorization: Bearer <API_KEY>`.", "missing_api_key"));
    if (!isWellFormedApiKey(secret)) return refuse("malformed_api_key", new ForbiddenError());
    const result = await deps.keyAuth.authenticate(secret);
    if (result.outcome === "forbidden") return refuse("unknown_or_revoked_api_key", new ForbiddenError());
    if (result.outcome === "subscription_required") return refuse("subscription_required", new SubscriptionRequiredError());
    ctx.state.principal = { accountId: result.principal.accountId, keyId: result.principal.keyId } satisfies Principal;
    deps.keyAuth.lastUsed.record(result.principal.keyId, deps.clock.now());
    await next();
  };
}
