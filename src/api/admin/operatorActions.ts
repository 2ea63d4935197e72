import { accountView, type AccountView } from "../accounts/accountView.ts";
import { AccountNotFoundError } from "../../ledger/domainError.ts";
import { executeAccountCommand } from "../../ledger/accounts/executeAccountCommand.ts";
import { findAccount, type AccountSelector } from "../accounts/findAccount.ts";
import type { AppDeps } from "../appDeps.ts";
import type { EventMetadata } from "../../ledger/eventStore/types.ts";
import { chfToMicro } from "../../ledger/money.ts";
import { NO_RATE_LIMITS, RateLimitsSchema, type RateLimits } from "../../ledger/accounts/accountEvents.ts";

export type OperatorDeps = Pick<AppDeps, "pool" | "clock" | "accounts">;

export type SubscriptionChange = {
  status: "active" | "inactive";
  /** Omitted: the budget stays as it is. */
  monthlyBudgetChf?: number;
};

export type SubscriptionChangeResult = { account: AccountView; appendedEvents: string[] };

/** The rate limits in the admin API's and CLI's JSON (snake case; null: the default). */
export type RateLimitsView = {
  requests_per_minute: number | null;
  tokens_per_minute: number | null;
  concurrent_requests: number | null;
  key_requests_per_minute: number | null;
  key_tokens_per_minute: number | null;
  key_concurrent_requests: number | null;
};

export function rateLimitsView(limits: RateLimits): RateLimitsView {
  return {
    requests_per_minute: limits.requestsPerMinute,
    tokens_per_minute: limits.tokensPerMinute,
    concurrent_requests: limits.concurrentRequests,
    key_requests_per_minute: limits.keyRequestsPerMinute,
    key_tokens_per_minute: limits.keyTokensPerMinute,
    key_concurrent_requests: limits.keyConcurrentRequests,
  };
}

export function rateLimitsFromView(view: Partial<RateLimitsView>): RateLimits {
  return {
    requestsPerMinute: view.requests_per_minute ?? null,
    tokensPerMinute: view.tokens_per_minute ?? null,
    concurrentRequests: view.concurrent_requests ?? null,
    keyRequestsPerMinute: view.key_requests_per_minute ?? null,
    keyTokensPerMinute: view.key_tokens_per_minute ?? null,
    keyConcurrentRequests: view.key_concurrent_requests ?? null,
  };
}

export type RateLimitsResult = { account: AccountView & { rate_limits: RateLimitsView }; appendedEvents: string[] };

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

  /** RateLimitsSet (the whole set; null: the default), unless the subscription already has these limits. */
  async setRateLimits(deps: OperatorDeps, selector: AccountSelector, limits: RateLimits, metadata: EventMetadata): Promise<RateLimitsResult> {
    const accountId = "accountId" in selector ? selector.accountId : (await requireAccount(deps, selector)).accountId;
    const result = await executeAccountCommand(deps.accounts, accountId, { type: "SetRateLimits", limits, now: deps.clock.now() }, metadata);
    const account = accountView(await requireAccount(deps, { accountId }));
    const row = await deps.pool.query<{ rate_limits: unknown }>("SELECT rate_limits FROM rm_accounts WHERE account_id = $1", [accountId]);
    const parsed = RateLimitsSchema.safeParse(row.rows[0]?.rate_limits);
    return {
      account: { ...account, rate_limits: rateLimitsView(parsed.success ? parsed.data : NO_RATE_LIMITS) },
      appendedEvents: result.events.map((e) => e.type),
    };
  },
};
