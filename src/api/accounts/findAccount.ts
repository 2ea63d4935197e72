import type { Queryable } from "../../ledger/eventStore/types.ts";

export type AccountRecord = {
  accountId: string;
  email: string;
  subscriptionStatus: "active" | "inactive";
  monthlyBudgetMicroChf: number;
  createdAt: Date;
};

export type AccountSelector = { accountId: string } | { email: string };

type AccountRow = {
  account_id: string;
  email: string;
  subscription_status: "active" | "inactive";
  monthly_budget_micro_chf: string;
  created_at: Date;
};

/** One account from the inline read model rm_accounts, by id or by (already normalised) email; null if none. */
export async function findAccount(db: Queryable, selector: AccountSelector): Promise<AccountRecord | null> {
  const [column, value] = "accountId" in selector ? ["account_id", selector.accountId] : ["email", selector.email];
  const result = await db.query<AccountRow>(
    `SELECT account_id, email, subscription_status, monthly_budget_micro_chf, created_at FROM rm_accounts WHERE ${column} = $1`,
    [value],
  );
  const row = result.rows[0];
  if (!row) return null;
  return {
    accountId: row.account_id,
    email: row.email,
    subscriptionStatus: row.subscription_status,
    monthlyBudgetMicroChf: Number(row.monthly_budget_micro_chf),
    createdAt: row.created_at,
  };
}
