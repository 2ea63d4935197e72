import { AccountNotFoundError, DomainError, KeyNotFoundError } from "../domainError.ts";
import { MAX_ACTIVE_KEYS, type AccountCommand } from "./accountCommands.ts";
import type { AccountEvent } from "./accountEvents.ts";
import { activeKeyCount, type AccountState } from "./accountState.ts";

/** Pure decision: which events a command causes on the account stream, or a refusal. */
export function decideAccount(command: AccountCommand, state: AccountState): AccountEvent[] {
  const at = command.now.toISOString();
  if (command.type === "RegisterAccount") {
    if (state.exists) throw new DomainError("invalid", "The account already exists.", { code: "account_exists" });
    return [{ type: "AccountRegistered", data: { accountId: command.accountId, email: command.email, registeredAt: at } }];
  }
  if (!state.exists || !state.accountId) throw new AccountNotFoundError();
  const accountId = state.accountId;
  switch (command.type) {
    case "SetSubscription": {
      const events: AccountEvent[] = [];
      if (command.status === "active" && state.subscriptionStatus !== "active") {
        events.push({ type: "SubscriptionActivated", data: { accountId, activatedAt: at } });
      }
      if (command.status === "inactive" && state.subscriptionStatus !== "inactive") {
        events.push({ type: "SubscriptionCancelled", data: { accountId, cancelledAt: at } });
      }
      if (command.monthlyBudgetMicroChf !== undefined && command.monthlyBudgetMicroChf !== state.monthlyBudgetMicroChf) {
        events.push({ type: "MonthlyBudgetSet", data: { accountId, monthlyBudgetMicroChf: command.monthlyBudgetMicroChf, setAt: at } });
      }
      return events;
    }
    case "SetRateLimits": {
      const same = (Object.keys(command.limits) as (keyof typeof command.limits)[]).every((k) => command.limits[k] === state.rateLimits[k]);
      if (same) return [];
      return [{ type: "RateLimitsSet", data: { accountId, limits: command.limits, setAt: at } }];
    }
    case "CreateKey": {
      if (activeKeyCount(state) >= MAX_ACTIVE_KEYS) {
        throw new DomainError("invalid", `An account may hold at most ${MAX_ACTIVE_KEYS} active API keys. Revoke a key before creating another.`, {
          code: "api_key_limit_reached",
        });
      }
      return [
        {
          type: "KeyCreated",
          data: { accountId, keyId: command.keyId, name: command.name, keyHash: command.keyHash, last4: command.last4, createdAt: at },
        },
      ];
    }
    case "RenameKey": {
      const key = state.keys[command.keyId];
      if (!key) throw new KeyNotFoundError(command.keyId);
      if (key.name === command.name) return [];
      return [{ type: "KeyRenamed", data: { accountId, keyId: key.keyId, name: command.name, renamedAt: at } }];
    }
    case "RevokeKey": {
      const key = state.keys[command.keyId];
      if (!key) throw new KeyNotFoundError(command.keyId);
      if (key.status === "revoked") return [];
      return [{ type: "KeyRevoked", data: { accountId, keyId: key.keyId, revokedAt: at } }];
    }
  }
}
