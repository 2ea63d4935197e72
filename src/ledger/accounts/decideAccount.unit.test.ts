import { describe, expect, it } from "vitest";
import { AccountNotFoundError, DomainError } from "../domainError.ts";
import type { AccountCommand } from "./accountCommands.ts";
import { NO_RATE_LIMITS, type AccountEvent } from "./accountEvents.ts";
import { evolveAccount, initialAccountState } from "./accountState.ts";
import { decideAccount } from "./decideAccount.ts";

const accountId = "6f1c2a0e-4b7d-4c1e-9a53-0d2f7b8e9a10";
const now = new Date("2025-03-01T10:00:00.000Z");
const at = now.toISOString();

const registered: AccountEvent = { type: "AccountRegistered", data: { accountId, email: "ada@example.ch", registeredAt: at } };
const activated: AccountEvent = { type: "SubscriptionActivated", data: { accountId, activatedAt: at } };
const budget = (micro: number): AccountEvent => ({ type: "MonthlyBudgetSet", data: { accountId, monthlyBudgetMicroChf: micro, setAt: at } });
const setSubscription = (status: "active" | "inactive", monthlyBudgetMicroChf?: number): AccountCommand => ({
  type: "SetSubscription",
  status,
  ...(monthlyBudgetMicroChf === undefined ? {} : { monthlyBudgetMicroChf }),
  now,
});

/** given(events).when(command) -> the events decided, or the error thrown. */
function given(events: AccountEvent[]) {
  const state = events.reduce(evolveAccount, initialAccountState());
  return {
    when(command: AccountCommand) {
      return {
        then: (expected: AccountEvent[]) => expect(decideAccount(command, state)).toEqual(expected),
        thenThrows: (errorClass: new (...args: never[]) => Error) => expect(() => decideAccount(command, state)).toThrow(errorClass),
      };
    },
  };
}

describe("decideAccount: registration", () => {
  it("registers a new account", () => {
    given([]).when({ type: "RegisterAccount", accountId, email: "ada@example.ch", now }).then([registered]);
  });

  it("refuses to register an account twice on one stream", () => {
    given([registered]).when({ type: "RegisterAccount", accountId, email: "ada@example.ch", now }).thenThrows(DomainError);
  });
});

describe("decideAccount: subscriptions", () => {
  it("refuses a subscription change on an account that does not exist", () => {
    given([]).when(setSubscription("active", 50_000_000)).thenThrows(AccountNotFoundError);
  });

  it("activates and sets the budget of a new account", () => {
    given([registered])
      .when(setSubscription("active", 50_000_000))
      .then([activated, budget(50_000_000)]);
  });

  it("activates without touching the budget when none is given", () => {
    given([registered, budget(7_000_000)])
      .when(setSubscription("active"))
      .then([activated]);
  });

  it("appends nothing when the state is already the requested one", () => {
    given([registered, activated, budget(50_000_000)])
      .when(setSubscription("active", 50_000_000))
      .then([]);
    given([registered]).when(setSubscription("inactive")).then([]);
    given([registered]).when(setSubscription("inactive", 0)).then([]);
  });

  it("only changes the budget when the status is unchanged", () => {
    given([registered, activated, budget(50_000_000)])
      .when(setSubscription("active", 20_500_000))
      .then([budget(20_500_000)]);
  });

  it("cancels an active subscription and keeps the budget", () => {
    given([registered, activated, budget(50_000_000)])
      .when(setSubscription("inactive"))
      .then([{ type: "SubscriptionCancelled", data: { accountId, cancelledAt: at } }]);
  });

  it("reactivates a cancelled subscription", () => {
    given([registered, activated, { type: "SubscriptionCancelled", data: { accountId, cancelledAt: at } }])
      .when(setSubscription("active"))
      .then([activated]);
  });
});

describe("decideAccount: rate limits", () => {
  const limits = { ...NO_RATE_LIMITS, requestsPerMinute: 60, keyConcurrentRequests: 2 };
  const limitsSet: AccountEvent = { type: "RateLimitsSet", data: { accountId, limits, setAt: at } };
  it("records the subscription's new rate limits", () => {
    given([registered, activated]).when({ type: "SetRateLimits", limits, now }).then([limitsSet]);
  });
  it("records nothing when the limits are already these", () => {
    given([registered, activated, limitsSet])
      .when({ type: "SetRateLimits", limits: { ...limits }, now })
      .then([]);
  });
  it("records a return to the defaults", () => {
    given([registered, limitsSet])
      .when({ type: "SetRateLimits", limits: NO_RATE_LIMITS, now })
      .then([{ type: "RateLimitsSet", data: { accountId, limits: NO_RATE_LIMITS, setAt: at } }]);
  });
  it("refuses an unknown account", () => {
    given([]).when({ type: "SetRateLimits", limits, now }).thenThrows(AccountNotFoundError);
  });
});

describe("evolveAccount", () => {
  it("folds registration, subscription and budget events into the state", () => {
    const state = [registered, activated, budget(12_340_000)].reduce(evolveAccount, initialAccountState());
    expect(state).toMatchObject({
      exists: true,
      accountId,
      email: "ada@example.ch",
      subscriptionStatus: "active",
      monthlyBudgetMicroChf: 12_340_000,
    });
    const cancelled = evolveAccount(state, { type: "SubscriptionCancelled", data: { accountId, cancelledAt: at } });
    expect(cancelled.subscriptionStatus).toBe("inactive");
    expect(cancelled.monthlyBudgetMicroChf).toBe(12_340_000);
  });
});
