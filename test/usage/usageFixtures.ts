import { randomUUID } from "node:crypto";
import { accountsWithoutCache } from "../support/accountsWithoutCache.ts";
import type { Pool } from "../../src/db/createPool.ts";
import { executeAccountCommand } from "../../src/ledger/accounts/executeAccountCommand.ts";
import type { UsageRecorded } from "../../src/ledger/usageRecordedEvent.ts";

/** An account with an active subscription and the given monthly budget, through the real account stream. */
export async function createBudgetedAccount(pool: Pool, monthlyBudgetMicroChf: number, now = new Date()): Promise<string> {
  const accountId = randomUUID();
  await executeAccountCommand(accountsWithoutCache(pool), accountId, { type: "RegisterAccount", accountId, email: `${accountId}@example.test`, now });
  await executeAccountCommand(accountsWithoutCache(pool), accountId, { type: "SetSubscription", status: "active", monthlyBudgetMicroChf, now });
  return accountId;
}

export async function setBudget(pool: Pool, accountId: string, monthlyBudgetMicroChf: number, status: "active" | "inactive" = "active"): Promise<void> {
  await executeAccountCommand(accountsWithoutCache(pool), accountId, { type: "SetSubscription", status, monthlyBudgetMicroChf, now: new Date() });
}

/** A UsageRecorded event with sensible defaults. */
export function usageEvent(overrides: Partial<UsageRecorded["data"]> & Pick<UsageRecorded["data"], "accountId">): UsageRecorded {
  const finishedAt = overrides.finishedAt ?? new Date().toISOString();
  return {
    type: "UsageRecorded",
    data: {
      completionId: randomUUID(),
      keyId: randomUUID(),
      model: "tiny-test",
      endpoint: "chat.completions",
      promptTokens: 10,
      completionTokens: 5,
      reasoningTokens: 0,
      costMicroChf: 100,
      priceTableVersion: "test-1",
      outcome: "finished",
      startedAt: finishedAt,
      finishedAt,
      traceId: null,
      ...overrides,
    },
  };
}

export async function budgetRow(pool: Pool, accountId: string, periodStart: string) {
  const r = await pool.query<{ budget: string; spent: string; held: string }>(
    "SELECT budget_micro_chf AS budget, spent_micro_chf AS spent, held_micro_chf AS held FROM rm_budget WHERE account_id = $1 AND period_start = $2",
    [accountId, periodStart],
  );
  const row = r.rows[0];
  return row ? { budget: Number(row.budget), spent: Number(row.spent), held: Number(row.held) } : null;
}

export async function openHolds(pool: Pool, accountId: string): Promise<number> {
  const r = await pool.query<{ n: string }>("SELECT count(*) AS n FROM budget_holds WHERE account_id = $1", [accountId]);
  return Number(r.rows[0]!.n);
}
