import type { Projection } from "../projection.ts";
import { USAGE_ROWS_SQL, usageColumns, usageRowsValues } from "../usageRecordedFrom.ts";

/**
 * rm_account_usage_daily: per account, UTC day, model and key, from UsageRecorded (less UsageRefunded). Serves the usage API.
 * A batch is summed per row in SQL and added with one statement, rows in key order (two writers, such
 * as a rebuild racing the projector, then lock rows in the same order and cannot deadlock).
 */
export const accountUsageDailyProjection: Projection = {
  name: "account_usage_daily",
  tables: ["rm_account_usage_daily"],
  async apply(db, events, columns = usageColumns(events)) {
    if (!columns) return;
    await db.query(
      `INSERT INTO rm_account_usage_daily AS t
         (account_id, day, model, key_id, requests, prompt_tokens, completion_tokens, reasoning_tokens, cost_micro_chf, batch_requests, batch_cost_micro_chf)
       SELECT account_id, day, model, key_id, sum(requests), sum(prompt), sum(completion), sum(reasoning), sum(cost), sum(batch), sum(cost * batch)
         FROM ${USAGE_ROWS_SQL}
        GROUP BY account_id, day, model, key_id
        ORDER BY account_id, day, model, key_id
       ON CONFLICT (account_id, day, model, key_id) DO UPDATE SET
         requests = t.requests + EXCLUDED.requests,
         prompt_tokens = t.prompt_tokens + EXCLUDED.prompt_tokens,
         completion_tokens = t.completion_tokens + EXCLUDED.completion_tokens,
         reasoning_tokens = t.reasoning_tokens + EXCLUDED.reasoning_tokens,
         cost_micro_chf = t.cost_micro_chf + EXCLUDED.cost_micro_chf,
         batch_requests = t.batch_requests + EXCLUDED.batch_requests,
         batch_cost_micro_chf = t.batch_cost_micro_chf + EXCLUDED.batch_cost_micro_chf`,
      usageRowsValues(columns),
    );
  },
};
