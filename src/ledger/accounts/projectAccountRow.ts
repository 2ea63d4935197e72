import type { Queryable } from "../eventStore/types.ts";
import type { AccountEvent } from "./accountEvents.ts";

/** Inline read model rm_accounts: applied in the same transaction as the account events. */
export async function projectAccountRow(db: Queryable, event: AccountEvent): Promise<void> {
  switch (event.type) {
    case "AccountRegistered":
      await db.query("INSERT INTO rm_accounts (account_id, email, created_at) VALUES ($1, $2, $3)", [
        event.data.accountId,
        event.data.email,
        event.data.registeredAt,
      ]);
      return;
    case "SubscriptionActivated":
      await db.query("UPDATE rm_accounts SET subscription_status = 'active' WHERE account_id = $1", [event.data.accountId]);
      return;
    case "SubscriptionCancelled":
      await db.query("UPDATE rm_accounts SET subscription_status = 'inactive' WHERE account_id = $1", [event.data.accountId]);
      return;
    case "MonthlyBudgetSet":
      await db.query("UPDATE rm_accounts SET monthly_budget_micro_chf = $2 WHERE account_id = $1", [event.data.accountId, event.data.monthlyBudgetMicroChf]);
      return;
    case "RateLimitsSet":
      await db.query("UPDATE rm_accounts SET rate_limits = $2 WHERE account_id = $1", [event.data.accountId, JSON.stringify(event.data.limits)]);
      return;
    default:
      return;
  }
}
