import type { Context, Next } from "koa";
import type { AppDeps } from "../appDeps.ts";
import { bearerToken } from "../http/bearerToken.ts";
import { type ApiError, ForbiddenError, SubscriptionRequiredError } from "../http/errors.ts";
import type { AuthRefusalReason } from "../../observability/metrics.ts";
import { AttemptLimiter, TooManyAttemptsError } from "../http/rateLimits.ts";
import { apiKeyHash, isWellFormedApiKey } from "../keys/apiKeySecret.ts";
import { type Principal, stateOf } from "../http/requestState.ts";
import { recentlyValidKeysOf } from "../keys/recentlyValidKeys.ts";

/** Who an inference request acts for; set by inferenceAuth, read with principalOf. */
export type { Principal };

function tooManyFailures(retryAfterSeconds: number): TooManyAttemptsError {
  return new TooManyAttemptsError(
    `Too many requests with an invalid API key from this address. Retry in ${retryAfterSeconds} seconds.`,
    "too_many_invalid_api_keys",
    retryAfterSeconds,
  );
}

/**
 * `Authorization: Bearer <API_KEY>` for the inference API. Missing, malformed (checksum), unknown or
 * revoked key -> 403 Forbidden; account without an active subscription -> 402 subscription_required for
 * the models and whatever makes something new (a POST other than a cancel); the account's reads, deletes
 * and cancels of its own completions, responses, files and batches are served.
 * A malformed key never reaches the database; a refused one is remembered briefly (ApiKeyAuth).
 *
 * Refused keys are limited per client address, API_KEY_FAILURES_PER_ADDRESS a minute, two ways: one
 * refused key sent again and again from an address (a stale CI job) is answered 429 after that many,
 * and only that key: the other keys of the address (an office behind one NAT) go on being looked up
 * and served. Different refused keys from one address (someone trying made-up keys) count once each;
 * past the limit the address's keys that are not known valid get 429 without a lookup, which bounds the
 * queries made-up keys cost; known valid are the keys in this process's cache and those that
 * authenticated in the last days anywhere (RecentlyValidKeys), so the colleagues of someone trying
 * made-up keys behind the same address go on being served. Records the key's use in the last-used batch.
 */
export function inferenceAuth(deps: Pick<AppDeps, "keyAuth" | "clock" | "metrics" | "redis" | "config">) {
  const limit = deps.config.rateLimits.apiKeyFailuresPerAddress;
  const keysRefused = new AttemptLimiter(deps.redis, `${deps.config.redisPrefix}:rl:api-key-failures:address`, limit);
  const keyRefused = new AttemptLimiter(deps.redis, `${deps.config.redisPrefix}:rl:api-key-failures:address-key`, limit);
  const recentlyValid = recentlyValidKeysOf(deps);
  const refuse = (ctx: Context, reason: AuthRefusalReason, error: ApiError): never => {
    deps.metrics.auth.refusals.inc({ reason });
    // A request without a valid key keeps no connection open after its answer: a client making up keys
    // opens one per try, and cannot hold idle connections for the keep-alive's 65 s at no cost.
    if (reason !== "subscription_required") ctx.set("connection", "close");
    throw error;
  };
  return async function requireApiKey(ctx: Context, next: Next): Promise<void> {
    const secret = bearerToken(ctx);
    // `Bearer` with something that is no one token (`Bearer <key> extra`) is a malformed key, not a missing one.
    if (!secret && /^Bearer\s+\S/i.test(ctx.get("authorization"))) return refuse(ctx, "malformed_api_key", new ForbiddenError());
    if (!secret) return refuse(ctx, "missing_api_key", new ForbiddenError("Missing API key: send `Authorization: Bearer <API_KEY>`.", "missing_api_key"));
    if (!isWellFormedApiKey(secret)) return refuse(ctx, "malformed_api_key", new ForbiddenError());
    const cached = deps.keyAuth.cached(secret);
    // A part of the key's hash: enough to tell an address's keys apart, never the key.
    const addressKey = () => `${ctx.ip}:${apiKeyHash(secret).slice(0, 24)}`;
    if (!cached) {
      // Both read at once: with Redis stalled each waits for the command timeout, and a request must get
      // its 503 within about two of them (this check's and its admission's).
      const [sameKeyBlocked, blocked] = await Promise.all([keyRefused.blockedFor(addressKey()), keysRefused.blockedFor(ctx.ip)]);
      if (sameKeyBlocked !== null) return refuse(ctx, "too_many_invalid_api_keys", tooManyFailures(sameKeyBlocked));
      if (blocked !== null && !(await recentlyValid.has(secret))) return refuse(ctx, "too_many_invalid_api_keys", tooManyFailures(blocked));
    }
    const result = cached ?? (await deps.keyAuth.authenticate(secret));
    if (!cached && result.outcome === "authorized") recentlyValid.mark(secret);
    if (result.outcome === "forbidden") {
      const sameKey = await keyRefused.count(addressKey());
      // A key counts once against its address, however often it is sent again.
      const wait = sameKey.attempts === 1 ? await keysRefused.consume(ctx.ip) : sameKey.retryAfterSeconds;
      if (wait !== null) return refuse(ctx, "too_many_invalid_api_keys", tooManyFailures(wait));
      return refuse(ctx, "unknown_or_revoked_api_key", new ForbiddenError());
    }
    // Without an active subscription the inference endpoints answer 402 (a POST that makes something new:
    // inference, a batch, an upload; and the models), but the account's own completions, responses, files
    // and batches can still be read, deleted and cancelled (a batch that would run on once the
    // subscription is back can be stopped, its results downloaded).
    const { accountId, keyId, rateLimits } = result.principal;
    // Set before a 402 as well: the key was valid, and the access line names it.
    stateOf(ctx).principal = { accountId, keyId, rateLimits } satisfies Principal;
    if (result.outcome === "subscription_required" && needsSubscription(ctx)) return refuse(ctx, "subscription_required", new SubscriptionRequiredError());
    deps.keyAuth.lastUsed.record(result.principal.keyId, deps.clock.now());
    await next();
  };
}

/** Whether a request needs an active subscription: inference and what makes something new, not the account's own things. */
function needsSubscription(ctx: Context): boolean {
  if (ctx.path === "/v1/models" || ctx.path.startsWith("/v1/models/")) return true;
  return ctx.method === "POST" && !ctx.path.endsWith("/cancel");
}
