import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
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

describe("executeAccountCommand with an extra afterAppend step", () => {
  it("commits the events, the read model and the extra step together", async () => {
    const accountId = randomUUID();
    await executeAccountCommand(db.pool, accountId, { type: "RegisterAccount", accountId, email: `${accountId}@example.ch`, now }, { actor: "test" }, {
      afterAppend: async (client) => {
        await client.query("INSERT INTO account_credentials (account_id, password_hash, updated_at) VALUES ($1, 'scrypt$x', $2)", [accountId, now]);
      },
    });
    expect((await readStream(db.pool, `account-${accountId}`)).events.map((e) => e.type)).toEqual(["AccountRegistered"]);
    expect((await db.pool.query("SELECT 1 FROM account_credentials WHERE account_id = $1", [accountId])).rowCount).toBe(1);
  });

  it("rolls everything back when the extra step fails: no event, no stream, no read-model row", async () => {
    const accountId = randomUUID();
    const failing = executeAccountCommand(db.pool, accountId, { type: "RegisterAccount", accountId, email: `${accountId}@example.ch`, now }, {}, {
      afterAppend: async () => {
        throw new Error("credentials store down");
      },
    });
    await expect(failing).rejects.toThrow("credentials store down");
    expect(await readStream(db.pool, `account-${accountId}`)).toEqual({ version: 0, events: [] });
    expect((await db.pool.query("SELECT 1 FROM rm_accounts WHERE account_id = $1", [accountId])).rowCount).toBe(0);
  });

  it("does not run the extra step when the command appends nothing", async () => {
    const accountId = randomUUID();
    await executeAccountCommand(db.pool, accountId, { type: "RegisterAccount", accountId, email: `${accountId}@example.ch`, now });
    let ran = false;
    const result = await executeAccountCommand(db.pool, accountId, { type: "SetSubscription", status: "inactive", now }, {}, {
      afterAppend: async () => {
        ran = true;
      },
    });
    expect(result.events).toEqual([]);
    expect(ran).toBe(false);
  });
});
