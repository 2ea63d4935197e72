import { randomUUID } from "node:crypto";
import { executeAccountCommand } from "../../src/ledger/accounts/executeAccountCommand.ts";
import { accountsWithoutCache } from "./accountsWithoutCache.ts";
import type { Pool } from "../../src/db/createPool.ts";
import { chfToMicro } from "../../src/ledger/money.ts";
import { createSession } from "../../src/api/sessions/sessionStore.ts";

export type TestAccount = { accountId: string; email: string; sessionToken: string };

/**
 * An account made directly through the account stream (no password, no HTTP): registered, with an
 * active subscription unless `subscription: "inactive"`, and a fresh session token.
 */
export async function createTestAccount(
  pool: Pool,
  options: { subscription?: "active" | "inactive"; monthlyBudgetChf?: number; email?: string; now?: Date } = {},
): Promise<TestAccount> {
  const accountId = randomUUID();
  const now = options.now ?? new Date();
  const email = options.email ?? `user-${accountId.slice(0, 8)}@example.test`;
  const metadata = { actor: "test", correlationId: randomUUID() };
  await executeAccountCommand(accountsWithoutCache(pool), accountId, { type: "RegisterAccount", accountId, email, now }, metadata);
  if ((options.subscription ?? "active") === "active") {
    await executeAccountCommand(
      accountsWithoutCache(pool),
      accountId,
      { type: "SetSubscription", status: "active", monthlyBudgetMicroChf: chfToMicro(options.monthlyBudgetChf ?? 100), now },
      metadata,
    );
  }
  const session = await createSession(pool, accountId, now, 3600_000);
  return { accountId, email, sessionToken: session.token };
}

/** Activates or cancels an account's subscription through the account stream. */
export async function setTestSubscription(pool: Pool, accountId: string, status: "active" | "inactive"): Promise<void> {
  await executeAccountCommand(
    accountsWithoutCache(pool),
    accountId,
    { type: "SetSubscription", status, now: new Date() },
    { actor: "test", correlationId: randomUUID() },
  );
}
