import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AccountCommandContext } from "../../src/ledger/accounts/accountCommandContext.ts";
import { executeAccountCommand } from "../../src/ledger/accounts/executeAccountCommand.ts";
import { readStream } from "../../src/ledger/eventStore/readStream.ts";
import { createTestDatabase, type TestDatabase } from "../support/testDatabase.ts";

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});

const now = new Date("2025-01-01T00:00:00.000Z");

/** Account commands whose committed changes are recorded (the API's would drop cached authorisations). */
let told: { accountId: string; types: string[] }[] = [];
const accounts = (): AccountCommandContext => ({
  pool: db.pool,
  changes: {
    committed: async (accountId, events) => {
      told.push({ accountId, types: events.map((e) => e.type) });
    },
  },
});

describe("executeAccountCommand with an extra afterAppend step", () => {
  it("commits the events, the read model and the extra step together", async () => {
    const accountId = randomUUID();
    await executeAccountCommand(
      accounts(),
      accountId,
      { type: "RegisterAccount", accountId, email: `${accountId}@example.ch`, now },
      { actor: "test" },
      {
        afterAppend: async (client) => {
          await client.query("INSERT INTO account_credentials (account_id, password_hash, updated_at) VALUES ($1, 'scrypt$x', $2)", [accountId, now]);
        },
      },
    );
    expect((await readStream(db.pool, `account-${accountId}`)).events.map((e) => e.type)).toEqual(["AccountRegistered"]);
    expect((await db.pool.query("SELECT 1 FROM account_credentials WHERE account_id = $1", [accountId])).rowCount).toBe(1);
  });

  it("rolls everything back when the extra step fails: no event, no stream, no read-model row", async () => {
    const accountId = randomUUID();
    const failing = executeAccountCommand(
      accounts(),
      accountId,
      { type: "RegisterAccount", accountId, email: `${accountId}@example.ch`, now },
      {},
      {
        afterAppend: async () => {
          throw new Error("credentials store down");
        },
      },
    );
    await expect(failing).rejects.toThrow("credentials store down");
    expect(await readStream(db.pool, `account-${accountId}`)).toEqual({ version: 0, events: [] });
    expect((await db.pool.query("SELECT 1 FROM rm_accounts WHERE account_id = $1", [accountId])).rowCount).toBe(0);
  });

  it("does not run the extra step when the command appends nothing", async () => {
    const accountId = randomUUID();
    await executeAccountCommand(accounts(), accountId, { type: "RegisterAccount", accountId, email: `${accountId}@example.ch`, now });
    let ran = false;
    const result = await executeAccountCommand(
      accounts(),
      accountId,
      { type: "SetSubscription", status: "inactive", now },
      {},
      {
        afterAppend: async () => {
          ran = true;
        },
      },
    );
    expect(result.events).toEqual([]);
    expect(ran).toBe(false);
  });
});

describe("executeAccountCommand tells of committed changes itself", () => {
  it("once per command that appended events, after the commit, with those events; never for a refused or empty command", async () => {
    told = [];
    const accountId = randomUUID();
    const keyId = randomUUID();
    await executeAccountCommand(accounts(), accountId, { type: "RegisterAccount", accountId, email: `${accountId}@example.ch`, now });
    await executeAccountCommand(accounts(), accountId, { type: "CreateKey", keyId, name: "a", keyHash: "h".repeat(64), last4: "abcd", now });
    await executeAccountCommand(accounts(), accountId, { type: "RenameKey", keyId, name: "b", now });
    await executeAccountCommand(accounts(), accountId, { type: "RenameKey", keyId, name: "b", now });
    await expect(executeAccountCommand(accounts(), accountId, { type: "RevokeKey", keyId: randomUUID(), now })).rejects.toThrow(/No API key/);
    let seenInLog: string[] = [];
    const revokeContext: AccountCommandContext = {
      pool: db.pool,
      changes: {
        committed: async (id, events) => {
          // Called after the commit: another connection already sees the revocation.
          seenInLog = (await readStream(db.pool, `account-${id}`)).events.map((e) => e.type);
          told.push({ accountId: id, types: events.map((e) => e.type) });
        },
      },
    };
    await executeAccountCommand(revokeContext, accountId, { type: "RevokeKey", keyId, now });
    await executeAccountCommand(accounts(), accountId, { type: "SetSubscription", status: "active", monthlyBudgetMicroChf: 5, now });
    expect(told).toEqual([
      { accountId, types: ["AccountRegistered"] },
      { accountId, types: ["KeyCreated"] },
      { accountId, types: ["KeyRenamed"] },
      { accountId, types: ["KeyRevoked"] },
      { accountId, types: ["SubscriptionActivated", "MonthlyBudgetSet"] },
    ]);
    expect(seenInLog.at(-1)).toBe("KeyRevoked");
  });
});
