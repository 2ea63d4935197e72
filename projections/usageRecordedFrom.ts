import type { RecordedEvent } from "../src/ledger/eventStore/types.ts";
import { UsageRecordedSchema, type UsageRecorded } from "../src/ledger/usageRecordedEvent.ts";
import { UsageRefundedSchema } from "../src/ledger/usageRefundedEvent.ts";

/** The UsageRecorded data of a log event (parsed with the contract schema), or null for other types. */
export function usageRecordedFrom(event: RecordedEvent): UsageRecorded["data"] | null {
  if (event.type !== "UsageRecorded") return null;
  return UsageRecordedSchema.parse({ type: event.type, data: event.data }).data;
}

/**
 * A usage read model's row of a log event: a UsageRecorded as it is, a UsageRefunded as the negative of
 * the tokens and cost it takes back, counted for the charge's day and time (`requests` 0: the request
 * still counts); null for other types.
 */
export function usageRowFrom(event: RecordedEvent): { usage: UsageRecorded["data"]; requests: number; sign: 1 | -1 } | null {
  if (event.type === "UsageRefunded") {
    const refund = UsageRefundedSchema.parse({ type: event.type, data: event.data }).data;
    const usage: UsageRecorded["data"] = {
      completionId: refund.completionId,
      accountId: refund.accountId,
      keyId: refund.keyId,
      model: refund.model,
      endpoint: refund.endpoint,
      promptTokens: refund.promptTokens,
      completionTokens: refund.completionTokens,
      reasoningTokens: refund.reasoningTokens,
      costMicroChf: refund.costMicroChf,
      priceTableVersion: "",
      outcome: "cancelled",
      startedAt: refund.chargedAt,
      finishedAt: refund.chargedAt,
      traceId: null,
    };
    return { usage, requests: 0, sign: -1 };
  }
  const usage = usageRecordedFrom(event);
  return usage ? { usage, requests: 1, sign: 1 } : null;
}

/**
 * An ISO 8601 UTC time whose date part is the UTC day as written: month 01-12, day 01-28 (valid in
 * every month), hour 00-23. The replay meets one per event: its day is read off the text, not built
 * through a Date.
 */
const PLAIN_UTC_TIME = /^\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|1\d|2[0-8])T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d{3})?Z$/;

/** The UTC day a usage counts for: the day its job finished. */
export function usageDay(usage: UsageRecorded["data"]): string {
  const finishedAt = usage.finishedAt;
  return PLAIN_UTC_TIME.test(finishedAt) ? finishedAt.slice(0, 10) : new Date(finishedAt).toISOString().slice(0, 10);
}

/**
 * The UsageRecorded and UsageRefunded events of a batch as parallel arrays, one per named field (index
 * i of every array is the i-th usage of the batch), for one `unnest(...)` statement. `day` is usageDay.
 * A refund's tokens and cost are negative and its `requests` 0 (usageRowFrom).
 */
export type UsageColumns = {
  requests: number[];
  accountId: string[];
  day: string[];
  model: string[];
  keyId: string[];
  promptTokens: number[];
  completionTokens: number[];
  reasoningTokens: number[];
  costMicroChf: number[];
  finishedAt: string[];
  /** 1 for the usage of a Batch API line (its event carries batchDiscountBps), else 0. */
  batch: number[];
};

/** The usage columns of `events` (parsed once, with the contract schema); null when the batch has none. */
export function usageColumns(events: RecordedEvent[]): UsageColumns | null {
  const columns: UsageColumns = {
    requests: [],
    accountId: [],
    day: [],
    model: [],
    keyId: [],
    promptTokens: [],
    completionTokens: [],
    reasoningTokens: [],
    costMicroChf: [],
    finishedAt: [],
    batch: [],
  };
  for (const event of events) {
    const row = usageRowFrom(event);
    if (!row) continue;
    const { usage, sign } = row;
    columns.requests.push(row.requests);
    columns.accountId.push(usage.accountId);
    columns.day.push(usageDay(usage));
    columns.model.push(usage.model);
    columns.keyId.push(usage.keyId);
    columns.promptTokens.push(sign * usage.promptTokens);
    columns.completionTokens.push(sign * usage.completionTokens);
    columns.reasoningTokens.push(sign * usage.reasoningTokens);
    columns.costMicroChf.push(sign * usage.costMicroChf);
    columns.finishedAt.push(usage.finishedAt);
    columns.batch.push(usage.batchDiscountBps === undefined ? 0 : 1);
  }
  return columns.accountId.length ? columns : null;
}

/** Each usage column as a SQL column of the `u` rows: its field, its name in SQL and its type. */
const USAGE_SQL_COLUMNS = [
  { field: "requests", name: "requests", type: "int" },
  { field: "accountId", name: "account_id", type: "text" },
  { field: "day", name: "day", type: "date" },
  { field: "model", name: "model", type: "text" },
  { field: "keyId", name: "key_id", type: "text" },
  { field: "promptTokens", name: "prompt", type: "bigint" },
  { field: "completionTokens", name: "completion", type: "bigint" },
  { field: "reasoningTokens", name: "reasoning", type: "bigint" },
  { field: "costMicroChf", name: "cost", type: "bigint" },
  { field: "finishedAt", name: "finished", type: "timestamptz" },
  { field: "batch", name: "batch", type: "int" },
] as const satisfies readonly { field: keyof UsageColumns; name: string; type: string }[];

/**
 * A FROM item of a batch's usages, one row each: `u(requests, account_id, day, model, key_id, prompt, completion,
 * reasoning, cost, finished, batch)`, its parameters $1.. in usageRowsValues order.
 */
export const USAGE_ROWS_SQL = `unnest(${USAGE_SQL_COLUMNS.map((c, i) => `$${i + 1}::${c.type}[]`).join(", ")}) AS u(${USAGE_SQL_COLUMNS.map((c) => c.name).join(", ")})`;

/** The parameters of USAGE_ROWS_SQL. */
export function usageRowsValues(columns: UsageColumns): unknown[] {
  return USAGE_SQL_COLUMNS.map((c) => columns[c.field]);
}
