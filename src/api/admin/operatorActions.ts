import { accountView, type AccountView } from "../accounts/accountView.ts";
import { AccountNotFoundError } from "../../ledger/domainError.ts";
import { executeAccountCommand } from "../../ledger/accounts/executeAccountCommand.ts";
import { findAccount, type AccountSelector } from "../accounts/findAccount.ts";
import type { AppDeps } from "../appDeps.ts";
import type { EventMetadata } from "../../ledger/eventStore/types.ts";
import { chfToMicro } from "../../ledger/money.ts";

export type OperatorDeps = Pick<AppDeps, "pool" | "clock" | "accounts">;

export type SubscriptionChange = {
  status: "active" | "inactive";
  /** Omitted: the budget stays as it is. */
  monthlyBudgetChf?: number;
};

export type SubscriptionChangeResult = { account: AccountView; appendedEvents: string[] };

async function requireAccount(deps: OperatorDeps, selector: AccountSelector) {
  const account = await findAccount(deps.pool, selector);
  if (!account) throw new AccountNotFoundError();
  return account;
}

/**
 * The operator's operations, shared by the admin HTTP API and the admin CLI (two thin front ends that
 * validate their input and render the result). Inputs are already validated and normalised.
 */
export const operatorActions = {
  async findAccount(deps: OperatorDeps, selector: AccountSelector): Promise<AccountView> {
    return accountView(await requireAccount(deps, selector));
  },

  /**
   * SubscriptionActivated / SubscriptionCancelled / MonthlyBudgetSet as needed; setting the state the
   * account already has appends nothing.
   */
  async setSubscription(deps: OperatorDeps, selector: AccountSelector, change: SubscriptionChange, metadata: EventMetadata): Promise<SubscriptionChangeResult> {
    const accountId = "accountId" in selector ? selector.accountId : (await requireAccount(deps, selector)).accountId;
    const result = await executeAccountCommand(
      deps.accounts,
      accountId,
      {
        type: "SetSubscription",
        status: change.status,
        ...(change.monthlyBudgetChf === undefined ? {} : { monthlyBudgetMicroChf: chfToMicro(change.monthlyBudgetChf) }),
        now: deps.clock.now(),
      },
      metadata,
    );
    return { account: accountView(await requireAccount(deps, { accountId })), appendedEvents: result.events.map((e) => e.type) };
  },
};
