import type { Projection } from "../projection.ts";
import { usageDay, usageRecordedFrom } from "../usageRecordedFrom.ts";

/** rm_account_usage_daily: per account, UTC day, model and key, from UsageRecorded. Serves the usage API. */
export const accountUsageDailyProjection: Projection = {
  name: "account_usage_daily",
  tables: ["rm_account_usage_daily"],
  async apply(db, event) {
    const usage = usageRecordedFrom(event);
    if (!usage) return;
    await db.query(
      `INSERT INTO rm_account_usage_daily AS t
         (account_id, day, model, key_id, requests, prompt_tokens, completion_tokens, reasoning_tokens, cost_micro_chf)
       VALUES ($1, $2::date, $3, $4, 1, $5, $6, $7, $8)
       ON CONFLICT (account_id, day, model, key_id) DO UPDATE SET
         requests = t.requests + 1,
         prompt_tokens = t.prompt_tokens + EXCLUDED.prompt_tokens,
         completion_tokens = t.completion_tokens + EXCLUDED.completion_tokens,
         reasoning_tokens = t.reasoning_tokens + EXCLUDED.reasoning_tokens,
         cost_micro_chf = t.cost_micro_chf + EXCLUDED.cost_micro_chf`,
      [usage.accountId, usageDay(usage), usage.model, usage.keyId, usage.promptTokens, usage.completionTokens, usage.reasoningTokens, usage.costMicroChf],
    );
  },
};
