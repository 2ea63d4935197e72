import Router from "@koa/router";
import type { Context, Next } from "koa";
import { AccountIdSchema } from "../accounts/accountSchemas.ts";
import { AccountNotFoundError } from "../../ledger/domainError.ts";
import type { AppDeps } from "../appDeps.ts";
import { requestMetadata } from "../http/requestMetadata.ts";
import { validate, validated } from "../http/validate.ts";
import { adminAuth } from "./adminAuth.ts";
import { FindAccountQuerySchema, SetRateLimitsBodySchema, SetSubscriptionBodySchema } from "./adminSchemas.ts";
import { operatorActions, rateLimitsFromView } from "./operatorActions.ts";
import { stateOf, requiredState } from "../http/requestState.ts";

/** A malformed account id names no account: 404, like an unknown one. Sets the accountId of the request state (requiredState reads it). */
async function accountIdParam(ctx: Context, next: Next): Promise<void> {
  const parsed = AccountIdSchema.safeParse((ctx as { params?: Record<string, string> }).params?.account_id);
  if (!parsed.success) throw new AccountNotFoundError();
  stateOf(ctx).accountId = parsed.data;
  await next();
}

/** Operator API (`Authorization: Bearer <ADMIN_TOKEN>`): a thin HTTP front end over operatorActions. */
export function adminRoutes(deps: AppDeps): Router {
  const router = new Router({ prefix: "/api/v1/admin", sensitive: true });
  const requireAdmin = adminAuth(deps);

  router.get("/accounts", requireAdmin, validate(FindAccountQuerySchema, "query"), async (ctx) => {
    const query = validated(ctx, FindAccountQuerySchema);
    ctx.body = await operatorActions.findAccount(deps, { email: query.email });
  });

  router.put("/accounts/:account_id/subscription", requireAdmin, accountIdParam, validate(SetSubscriptionBodySchema), async (ctx) => {
    const accountId = requiredState(ctx, "accountId");
    const body = validated(ctx, SetSubscriptionBodySchema);
    const result = await operatorActions.setSubscription(
      deps,
      { accountId },
      { status: body.status, ...(body.monthly_budget_chf === undefined ? {} : { monthlyBudgetChf: body.monthly_budget_chf }) },
      requestMetadata(ctx, "admin:http"),
    );
    deps.logger.info("subscription set by operator", { accountId, appendedEvents: result.appendedEvents, requestId: stateOf(ctx).requestId });
    ctx.body = result.account;
  });

  router.put("/accounts/:account_id/rate_limits", requireAdmin, accountIdParam, validate(SetRateLimitsBodySchema), async (ctx) => {
    const accountId = requiredState(ctx, "accountId");
    const body = validated(ctx, SetRateLimitsBodySchema);
    const result = await operatorActions.setRateLimits(deps, { accountId }, rateLimitsFromView(body), requestMetadata(ctx, "admin:http"));
    deps.logger.info("rate limits set by operator", { accountId, appendedEvents: result.appendedEvents, requestId: stateOf(ctx).requestId });
    ctx.body = result.account;
  });

  return router;
}
