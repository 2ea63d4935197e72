import type { RateLimits } from "./accountEvents.ts";
/** Commands on the account stream: plain data, timestamps and ids decided by the caller. */
export type RegisterAccount = { type: "RegisterAccount"; accountId: string; email: string; now: Date };
export type SetSubscription = {
  type: "SetSubscription";
  status: "active" | "inactive";
  /** Undefined leaves the budget as it is. */
  monthlyBudgetMicroChf?: number;
  now: Date;
};
/** Replaces the subscription's rate limits (null: the default). */
export type SetRateLimits = { type: "SetRateLimits"; limits: RateLimits; now: Date };
export type CreateKey = { type: "CreateKey"; keyId: string; name: string; keyHash: string; last4: string; now: Date };
export type RenameKey = { type: "RenameKey"; keyId: string; name: string; now: Date };
export type RevokeKey = { type: "RevokeKey"; keyId: string; now: Date };

export type AccountCommand = RegisterAccount | SetSubscription | SetRateLimits | CreateKey | RenameKey | RevokeKey;

export const MAX_ACTIVE_KEYS = 5;
