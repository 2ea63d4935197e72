import type { Projection } from "../projection.ts";
import { USAGE_ROWS_SQL, usageColumns, usageRowsValues } from "../usageRecordedFrom.ts";

/**
 * rm_key_usage_daily: per API key and UTC day, from UsageRecorded (less UsageRefunded): requests, tokens, cost (micro-CHF)
 * and the latest finish time. Key stats (totals, last_used_at, last 30 days) are read from it.
 * A batch is summed per row in SQL and added with one statement, rows in key order (two writers, such
 * as a rebuild racing the projector, then lock rows in the same order and cannot deadlock).
 */
export const keyUsageDailyProjection: Projection = {
  name: "key_usage_daily",
  tables: ["rm_key_usage_daily"],
  async apply(db, events, columns = usageColumns(events)) {
    if (!columns) return;
    await db.query(
      `INSERT INTO rm_key_usage_daily AS t
         (key_id, day, account_id, requests, prompt_tokens, completion_tokens, reasoning_tokens, cost_micro_chf, batch_requests, batch_cost_micro_chf, last_used_at)
       SELECT key_id, day, min(account_id), sum(requests), sum(prompt), sum(completion), sum(reasoning), sum(cost), sum(batch), sum(cost * batch), max(finished)
         FROM ${USAGE_ROWS_SQL}
        GROUP BY key_id, day
        ORDER BY key_id, day
       ON CONFLICT (key_id, day) DO UPDATE SET
         requests = t.requests + EXCLUDED.requests,
         prompt_tokens = t.prompt_tokens + EXCLUDED.prompt_tokens,
         completion_tokens = t.completion_tokens + EXCLUDED.completion_tokens,
         reasoning_tokens = t.reasoning_tokens + EXCLUDED.reasoning_tokens,
         cost_micro_chf = t.cost_micro_chf + EXCLUDED.cost_micro_chf,
         batch_requests = t.batch_requests + EXCLUDED.batch_requests,
         batch_cost_micro_chf = t.batch_cost_micro_chf + EXCLUDED.batch_cost_micro_chf,
         last_used_at = GREATEST(t.last_used_at, EXCLUDED.last_used_at)`,
      usageRowsValues(columns),
    );
  },
};
