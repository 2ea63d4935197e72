import type { Pool } from "../../src/db/createPool.ts";
import type { UsageRecorded } from "../../src/ledger/usageRecordedEvent.ts";

export type KeyDayRow = {
  key_id: string;
  day: string;
  account_id: string;
  requests: number;
  prompt_tokens: number;
  completion_tokens: number;
  reasoning_tokens: number;
  cost_micro_chf: number;
  batch_requests: number;
  batch_cost_micro_chf: number;
  last_used_at: string;
};
export type AccountDayRow = {
  account_id: string;
  day: string;
  model: string;
  key_id: string;
  requests: number;
  prompt_tokens: number;
  completion_tokens: number;
  reasoning_tokens: number;
  cost_micro_chf: number;
  batch_requests: number;
  batch_cost_micro_chf: number;
};

const dayOf = (iso: string) => new Date(iso).toISOString().slice(0, 10);

/** The read models computed by hand (plain sums in JavaScript) from the events' data. */
export function expectedUsage(events: UsageRecorded["data"][]): { keyDays: KeyDayRow[]; accountDays: AccountDayRow[] } {
  const keyDays = new Map<string, KeyDayRow>();
  const accountDays = new Map<string, AccountDayRow>();
  for (const e of events) {
    const day = dayOf(e.finishedAt);
    const k = keyDays.get(`${e.keyId}|${day}`) ?? {
      key_id: e.keyId,
      day,
      account_id: e.accountId,
      requests: 0,
      prompt_tokens: 0,
      completion_tokens: 0,
      reasoning_tokens: 0,
      cost_micro_chf: 0,
      batch_requests: 0,
      batch_cost_micro_chf: 0,
      last_used_at: new Date(0).toISOString(),
    };
    k.requests += 1;
    k.prompt_tokens += e.promptTokens;
    k.completion_tokens += e.completionTokens;
    k.reasoning_tokens += e.reasoningTokens;
    k.cost_micro_chf += e.costMicroChf;
    if (e.batchDiscountBps !== undefined) {
      k.batch_requests += 1;
      k.batch_cost_micro_chf += e.costMicroChf;
    }
    if (new Date(e.finishedAt) > new Date(k.last_used_at)) k.last_used_at = new Date(e.finishedAt).toISOString();
    keyDays.set(`${e.keyId}|${day}`, k);
    const id = `${e.accountId}|${day}|${e.model}|${e.keyId}`;
    const a = accountDays.get(id) ?? {
      account_id: e.accountId,
      day,
      model: e.model,
      key_id: e.keyId,
      requests: 0,
      prompt_tokens: 0,
      completion_tokens: 0,
      reasoning_tokens: 0,
      cost_micro_chf: 0,
      batch_requests: 0,
      batch_cost_micro_chf: 0,
    };
    a.requests += 1;
    a.prompt_tokens += e.promptTokens;
    a.completion_tokens += e.completionTokens;
    a.reasoning_tokens += e.reasoningTokens;
    a.cost_micro_chf += e.costMicroChf;
    if (e.batchDiscountBps !== undefined) {
      a.batch_requests += 1;
      a.batch_cost_micro_chf += e.costMicroChf;
    }
    accountDays.set(id, a);
  }
  const byJson = <T>(rows: T[]) => rows.sort((x, y) => (JSON.stringify(x) < JSON.stringify(y) ? -1 : 1));
  return { keyDays: byJson([...keyDays.values()]), accountDays: byJson([...accountDays.values()]) };
}

/** The live read models, as plain rows comparable with expectedUsage(), restricted to the given accounts. */
export async function liveUsage(pool: Pool, accountIds: string[]): Promise<{ keyDays: KeyDayRow[]; accountDays: AccountDayRow[] }> {
  const k = await pool.query(
    `SELECT key_id, day::text AS day, account_id, requests::int, prompt_tokens::int, completion_tokens::int, reasoning_tokens::int,
            cost_micro_chf::int, batch_requests::int, batch_cost_micro_chf::int, last_used_at FROM rm_key_usage_daily WHERE account_id = ANY($1::text[])`,
    [accountIds],
  );
  const a = await pool.query(
    `SELECT account_id, day::text AS day, model, key_id, requests::int, prompt_tokens::int, completion_tokens::int, reasoning_tokens::int,
            cost_micro_chf::int, batch_requests::int, batch_cost_micro_chf::int FROM rm_account_usage_daily WHERE account_id = ANY($1::text[])`,
    [accountIds],
  );
  const byJson = <T>(rows: T[]) => rows.sort((x, y) => (JSON.stringify(x) < JSON.stringify(y) ? -1 : 1));
  return {
    keyDays: byJson(k.rows.map((r) => ({ ...r, last_used_at: (r.last_used_at as Date).toISOString() })) as KeyDayRow[]),
    accountDays: byJson(a.rows as AccountDayRow[]),
  };
}
