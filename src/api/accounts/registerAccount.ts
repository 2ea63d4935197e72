import { randomUUID } from "node:crypto";
import type { AppDeps } from "../appDeps.ts";
import type { EventMetadata } from "../../ledger/eventStore/types.ts";
import { ConflictError } from "../http/errors.ts";
import type { RegisterBody } from "./accountSchemas.ts";
import { executeAccountCommand } from "../../ledger/accounts/executeAccountCommand.ts";
import type { FairHashGate } from "./fairHashGate.ts";
import { passwordHasher } from "./passwordHasher.ts";

export type RegisteredAccount = { accountId: string; email: string; createdAt: Date };

export class EmailTakenError extends ConflictError {
  constructor() {
    super("An account with this email address already exists.", { code: "email_taken", param: "email", final: true });
  }
}

/** The UNIQUE constraint on rm_accounts.email (lower-cased), the race-proof duplicate check. */
const EMAIL_UNIQUE_CONSTRAINT = "rm_accounts_email_key";

function isEmailTaken(error: unknown): boolean {
  const e = error as { code?: string; constraint?: string };
  return e.code === "23505" && e.constraint === EMAIL_UNIQUE_CONSTRAINT;
}

/**
 * Registers an account: AccountRegistered on a new `account-<id>` stream, its rm_accounts row and the
 * password hash in account_credentials, all in one transaction. A taken email violates the unique
 * constraint inside that transaction, so the whole command rolls back (no event) and answers 409.
 */
export async function registerAccount(
  deps: Pick<AppDeps, "accounts" | "clock">,
  hashing: { gate: FairHashGate; clientAddress: string },
  body: RegisterBody,
  /** correlationId, traceparent...; the actor is the new account itself. */
  metadata: EventMetadata = {},
): Promise<RegisteredAccount> {
  const accountId = randomUUID();
  const now = deps.clock.now();
  // PostgreSQL is asked while the password is hashed (0.3-0.5 s of scrypt, longer behind other hashes):
  // when it cannot be reached, the request answers 503 as soon as that shows (within the pool's connect or
  // query timeout), instead of after the hash and then the same timeout again.
  const [passwordHash] = await Promise.all([
    hashing.gate.run({ key: hashing.clientAddress, knownDevice: false }, () => passwordHasher.hash(body.password)),
    deps.accounts.pool.query("SELECT 1"),
  ]);
  try {
    await executeAccountCommand(
      deps.accounts,
      accountId,
      { type: "RegisterAccount", accountId, email: body.email, now },
      { ...metadata, actor: `account:${accountId}` },
      {
        afterAppend: async (client) => {
          await client.query("INSERT INTO account_credentials (account_id, password_hash, updated_at) VALUES ($1, $2, $3)", [accountId, passwordHash, now]);
        },
      },
    );
  } catch (error) {
    if (isEmailTaken(error)) throw new EmailTakenError();
    throw error;
  }
  return { accountId, email: body.email, createdAt: now };
}
