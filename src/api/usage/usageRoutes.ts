import Router from "@koa/router";
import type { AppDeps } from "../appDeps.ts";
import { validate, validated } from "../http/validate.ts";
import { microToChf } from "../../ledger/money.ts";
import { sessionAuth, sessionOf } from "../sessions/sessionAuth.ts";
import { currentPeriodFigures } from "../../ledger/budget/currentPeriodFigures.ts";
import { readAccountUsage, type UsageGroup } from "./readAccountUsage.ts";
import { UsageQuerySchema, type UsageGroupBy } from "./usageQuerySchema.ts";
import { usageRange } from "./usageRange.ts";

const GROUP_FIELD: Record<UsageGroupBy, string> = { day: "date", key: "key_id", model: "model" };

function groupView(groupBy: UsageGroupBy, g: UsageGroup) {
  return {
    [GROUP_FIELD[groupBy]]: g.group,
    ...(groupBy === "key" ? { name: g.keyName } : {}),
    requests: g.requests,
    prompt_tokens: g.promptTokens,
    completion_tokens: g.completionTokens,
    reasoning_tokens: g.reasoningTokens,
    total_tokens: g.promptTokens + g.completionTokens,
    cost_chf: microToChf(g.costMicroChf),
    batch_requests: g.batchRequests,
    batch_cost_chf: microToChf(g.batchCostMicroChf),
  };
}

/**
 * The usage API (session): `GET /api/v1/accounts/user/usage?start_date=&end_date=&group_by=day|key|model`.
 * `period` is the current billing period's money; `data` the usage of the requested inclusive UTC days
 * (default: the current billing period), as recorded by UsageRecorded and projected into
 * rm_account_usage_daily (visible within about a second of a request finishing).
 */
export function usageRoutes(deps: AppDeps): Router {
  const router = new Router({ prefix: "/api/v1/accounts/user", sensitive: true });
  router.get(["/usage", "/usage/"], sessionAuth(deps), validate(UsageQuerySchema, "query"), async (ctx) => {
    const session = sessionOf(ctx);
    const query = validated(ctx, UsageQuerySchema);
    const now = deps.clock.now();
    const range = usageRange(query, now);
    const [period, groups] = await Promise.all([
      currentPeriodFigures(deps.pool, session.accountId, now),
      readAccountUsage(deps.pool, session.accountId, range, query.group_by),
    ]);
    const costMicro = groups.reduce((sum, g) => sum + g.costMicroChf, 0);
    const promptTokens = groups.reduce((sum, g) => sum + g.promptTokens, 0);
    const completionTokens = groups.reduce((sum, g) => sum + g.completionTokens, 0);
    ctx.set("cache-control", "no-store");
    ctx.body = {
      object: "list",
      start_date: range.startDate,
      end_date: range.endDate,
      group_by: query.group_by,
      period,
      data: groups.map((g) => groupView(query.group_by, g)),
      total: {
        requests: groups.reduce((sum, g) => sum + g.requests, 0),
        prompt_tokens: promptTokens,
        completion_tokens: completionTokens,
        reasoning_tokens: groups.reduce((sum, g) => sum + g.reasoningTokens, 0),
        total_tokens: promptTokens + completionTokens,
        cost_chf: microToChf(costMicro),
        batch_requests: groups.reduce((sum, g) => sum + g.batchRequests, 0),
        batch_cost_chf: microToChf(groups.reduce((sum, g) => sum + g.batchCostMicroChf, 0)),
      },
    };
  });
  return router;
}
