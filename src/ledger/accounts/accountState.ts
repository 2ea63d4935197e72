import { NO_RATE_LIMITS, type AccountEvent, type RateLimits } from "./accountEvents.ts";

export type KeyState = { keyId: string; name: string; status: "active" | "revoked" };

export type AccountState = {
  exists: boolean;
  accountId: string | null;
  email: string | null;
  subscriptionStatus: "active" | "inactive";
  monthlyBudgetMicroChf: number;
  rateLimits: RateLimits;
  keys: Record<string, KeyState>;
};

export function initialAccountState(): AccountState {
  return { exists: false, accountId: null, email: null, subscriptionStatus: "inactive", monthlyBudgetMicroChf: 0, rateLimits: NO_RATE_LIMITS, keys: {} };
}

export function activeKeyCount(state: AccountState): number {
  return Object.values(state.keys).filter((k) => k.status === "active").length;
}

/** Pure fold of one event into the state. */
export function evolveAccount(state: AccountState, event: AccountEvent): AccountState {
  switch (event.type) {
    case "AccountRegistered":
      return { ...state, exists: true, accountId: event.data.accountId, email: event.data.email };
    case "SubscriptionActivated":
      return { ...state, subscriptionStatus: "active" };
    case "SubscriptionCancelled":
      return { ...state, subscriptionStatus: "inactive" };
    case "MonthlyBudgetSet":
      return { ...state, monthlyBudgetMicroChf: event.data.monthlyBudgetMicroChf };
    case "RateLimitsSet":
      return { ...state, rateLimits: event.data.limits };
    case "KeyCreated":
      return { ...state, keys: { ...state.keys, [event.data.keyId]: { keyId: event.data.keyId, name: event.data.name, status: "active" } } };
    case "KeyRenamed": {
      const key = state.keys[event.data.keyId];
      return key ? { ...state, keys: { ...state.keys, [key.keyId]: { ...key, name: event.data.name } } } : state;
    }
    case "KeyRevoked": {
      const key = state.keys[event.data.keyId];
      return key ? { ...state, keys: { ...state.keys, [key.keyId]: { ...key, status: "revoked" } } } : state;
    }
  }
}
