import type { Projection } from "../projection.ts";
import { usageDay, usageRecordedFrom } from "../usageRecordedFrom.ts";

/**
 * rm_key_usage_daily: per API key and UTC day, from UsageRecorded: requests, tokens, cost (micro-CHF)
 * and the latest finish time. Key stats (totals, last_used_at, last 30 days) are read from it.
 */
export const keyUsageDailyProjection: Projection = {
  name: "key_usage_daily",
  tables: ["rm_key_usage_daily"],
  async apply(db, event) {
    const usage = usageRecordedFrom(event);
    if (!usage) return;
    await db.query(
      `INSERT INTO rm_key_usage_daily AS t
         (key_id, day, account_id, requests, prompt_tokens, completion_tokens, reasoning_tokens, cost_micro_chf, last_used_at)
       VALUES ($1, $2::date, $3, 1, $4, $5, $6, $7, $8::timestamptz)
       ON CONFLICT (key_id, day) DO UPDATE SET
         requests = t.requests + 1,
         prompt_tokens = t.prompt_tokens + EXCLUDED.prompt_tokens,
         completion_tokens = t.completion_tokens + EXCLUDED.completion_tokens,
         reasoning_tokens = t.reasoning_tokens + EXCLUDED.reasoning_tokens,
         cost_micro_chf = t.cost_micro_chf + EXCLUDED.cost_micro_chf,
         last_used_at = GREATEST(t.last_used_at, EXCLUDED.last_used_at)`,
      [usage.keyId, usageDay(usage), usage.accountId, usage.promptTokens, usage.completionTokens, usage.reasoningTokens, usage.costMicroChf, usage.finishedAt],
    );
  },
};
