import Router from "@koa/router";
import type { Context, Next } from "koa";
import { AccountIdSchema } from "../accounts/accountSchemas.ts";
import { AccountNotFoundError } from "../../ledger/domainError.ts";
import type { AppDeps } from "../appDeps.ts";
import { requestMetadata } from "../http/requestMetadata.ts";
import { validate } from "../http/validate.ts";
import { adminAuth } from "./adminAuth.ts";
import {
  FindAccountQuerySchema,
  SetRateLimitsBodySchema,
  SetSubscriptionBodySchema,
  type FindAccountQuery,
  type SetRateLimitsBody,
  type SetSubscriptionBody,
} from "./adminSchemas.ts";
import { operatorActions, rateLimitsFromView } from "./operatorActions.ts";

/** A malformed account id names no account: 404, like an unknown one. Sets ctx.state.accountId. */
async function accountIdParam(ctx: Context, next: Next): Promise<void> {
  const parsed = AccountIdSchema.safeParse((ctx as { params?: Record<string, string> }).params?.account_id);
  if (!parsed.success) throw new AccountNotFoundError();
  ctx.state.accountId = parsed.data;
  await next();
}

/** Operator API (`Authorization: Bearer <ADMIN_TOKEN>`): a thin HTTP front end over operatorActions. */
export function adminRoutes(deps: AppDeps): Router {
  const router = new Router({ prefix: "/api/v1/admin" });
  const requireAdmin = adminAuth(deps);

  router.get("/accounts", requireAdmin, validate(FindAccountQuerySchema, "query"), async (ctx) => {
    const query = ctx.state.query as FindAccountQuery;
    ctx.body = await operatorActions.findAccount(deps, { email: query.email });
  });

  router.put("/accounts/:account_id/subscription", requireAdmin, accountIdParam, validate(SetSubscriptionBodySchema), async (ctx) => {
    const accountId = ctx.state.accountId as string;
    const body = ctx.state.body as SetSubscriptionBody;
    const result = await operatorActions.setSubscription(
      deps,
      { accountId },
      { status: body.status, ...(body.monthly_budget_chf === undefined ? {} : { monthlyBudgetChf: body.monthly_budget_chf }) },
      requestMetadata(ctx, "admin"),
    );
    deps.logger.info("subscription set by operator", { accountId, appendedEvents: result.appendedEvents, requestId: ctx.state.requestId });
    ctx.body = result.account;
  });

  router.put("/accounts/:account_id/rate_limits", requireAdmin, accountIdParam, validate(SetRateLimitsBodySchema), async (ctx) => {
    const accountId = ctx.state.accountId as string;
    const body = ctx.state.body as SetRateLimitsBody;
    const result = await operatorActions.setRateLimits(deps, { accountId }, rateLimitsFromView(body), requestMetadata(ctx, "admin"));
    deps.logger.info("rate limits set by operator", { accountId, appendedEvents: result.appendedEvents, requestId: ctx.state.requestId });
    ctx.body = result.account;
  });

  return router;
}
