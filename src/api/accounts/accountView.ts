import { microToChf } from "../../ledger/money.ts";
import type { AccountRecord } from "./findAccount.ts";

export type AccountView = {
  id: string;
  email: string;
  created_at: string;
  subscription: { status: "active" | "inactive"; monthly_budget_chf: number };
};

/** The JSON form of an account, shared by `GET /api/v1/accounts/user/`, the admin API and the admin CLI. */
export function accountView(account: AccountRecord): AccountView {
  return {
    id: account.accountId,
    email: account.email,
    created_at: account.createdAt.toISOString(),
    subscription: { status: account.subscriptionStatus, monthly_budget_chf: microToChf(account.monthlyBudgetMicroChf) },
  };
}
