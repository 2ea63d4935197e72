import type { Queryable } from "../../ledger/eventStore/types.ts";
import type { UsageGroupBy } from "./usageQuerySchema.ts";
import type { UsageRange } from "./usageRange.ts";

export type UsageGroup = {
  /** The group's value: a date (YYYY-MM-DD), a key id or a model id. */
  group: string;
  /** The key's current name (group_by key only; null when the key is unknown). */
  keyName: string | null;
  requests: number;
  promptTokens: number;
  completionTokens: number;
  reasoningTokens: number;
  costMicroChf: number;
  /** Of which Batch API lines (their requests and discounted cost). */
  batchRequests: number;
  batchCostMicroChf: number;
};

/** Grouped and ordered by the column itself (a date sorts as a date), shown as text. */
const GROUP_COLUMN: Record<UsageGroupBy, string> = { day: "u.day", key: "u.key_id", model: "u.model" };

/** An account's usage over an inclusive UTC day range, grouped by day, key or model (from rm_account_usage_daily). */
export async function readAccountUsage(db: Queryable, accountId: string, range: UsageRange, groupBy: UsageGroupBy): Promise<UsageGroup[]> {
  const column = GROUP_COLUMN[groupBy];
  const rows = await db.query<{
    grp: string;
    key_name: string | null;
    requests: string;
    prompt_tokens: string;
    completion_tokens: string;
    reasoning_tokens: string;
    cost: string;
    batch_requests: string;
    batch_cost: string;
  }>(
    `SELECT ${column}::text AS grp,
            ${groupBy === "key" ? "(SELECT k.name FROM rm_keys k WHERE k.key_id::text = u.key_id)" : "NULL::text"} AS key_name,
            sum(u.requests) AS requests, sum(u.prompt_tokens) AS prompt_tokens, sum(u.completion_tokens) AS completion_tokens,
            sum(u.reasoning_tokens) AS reasoning_tokens, sum(u.cost_micro_chf) AS cost,
            sum(u.batch_requests) AS batch_requests, sum(u.batch_cost_micro_chf) AS batch_cost
       FROM rm_account_usage_daily u
      WHERE u.account_id = $1 AND u.day BETWEEN $2::date AND $3::date
      GROUP BY ${column}
      ORDER BY ${column}`,
    [accountId, range.startDate, range.endDate],
  );
  return rows.rows.map((r) => ({
    group: r.grp,
    keyName: r.key_name,
    requests: Number(r.requests),
    promptTokens: Number(r.prompt_tokens),
    completionTokens: Number(r.completion_tokens),
    reasoningTokens: Number(r.reasoning_tokens),
    costMicroChf: Number(r.cost),
    batchRequests: Number(r.batch_requests),
    batchCostMicroChf: Number(r.batch_cost),
  }));
}
