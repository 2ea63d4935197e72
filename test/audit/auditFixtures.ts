import { randomUUID } from "node:crypto";
import type { Pool } from "../../src/db/createPool.ts";
import { executeAccountCommand } from "../../src/ledger/accounts/executeAccountCommand.ts";
import { writeAuditCheckpoints } from "../../src/ledger/audit/auditCheckpoint.ts";
import type { CheckpointSigner } from "../../src/ledger/audit/checkpointSignature.ts";
import { UsageRecorder } from "../../workers/completion/usageRecorder.ts";
import { costMicroChf } from "../../src/ledger/pricing/costMicroChf.ts";
import { publishPriceTable, type PriceTable } from "../../src/ledger/pricing/priceTable.ts";
import { allProjections } from "../../projections/allProjections.ts";
import { rebuildProjections } from "../../projections/rebuildProjections.ts";
import { accountsWithoutCache } from "../support/accountsWithoutCache.ts";
import { usageEvent } from "../usage/usageFixtures.ts";

export const PRICES_V1: PriceTable = { "tiny-test": { inputMicroChfPerMillion: 100_000, outputMicroChfPerMillion: 400_000 } };
export const PRICES_V2: PriceTable = { "tiny-test": { inputMicroChfPerMillion: 150_000, outputMicroChfPerMillion: 700_000 } };

export type AuditedAccount = { accountId: string; keyIds: string[]; completionIds: string[] };

/**
 * A small real history through the ledger's own commands: accounts with keys (one renamed, one revoked),
 * completions charged at a first price table version, a price change, more completions, a checkpoint in
 * between and at the end, and the projected read models caught up.
 */
export async function buildAuditedLog(pool: Pool, accountCount = 2, signer: CheckpointSigner | null = null): Promise<AuditedAccount[]> {
  const accounts: AuditedAccount[] = [];
  const v1 = await publishPriceTable(pool, "audit-1", PRICES_V1, new Date(Date.now() - 60_000));
  for (let a = 0; a < accountCount; a++) {
    const accountId = randomUUID();
    const ctx = accountsWithoutCache(pool);
    const now = new Date();
    await executeAccountCommand(ctx, accountId, { type: "RegisterAccount", accountId, email: `${accountId}@example.test`, now });
    await executeAccountCommand(ctx, accountId, { type: "SetSubscription", status: "active", monthlyBudgetMicroChf: 50_000_000, now });
    const keyIds = [randomUUID(), randomUUID()];
    for (const [i, keyId] of keyIds.entries()) {
      await executeAccountCommand(ctx, accountId, {
        type: "CreateKey",
        keyId,
        name: `key ${i}`,
        keyHash: randomUUID().replaceAll("-", ""),
        last4: "abcd",
        now,
      });
    }
    await executeAccountCommand(ctx, accountId, { type: "RenameKey", keyId: keyIds[0]!, name: "renamed", now });
    accounts.push({ accountId, keyIds, completionIds: [] });
  }
  const charge = async (account: AuditedAccount, version: string, prices: PriceTable, promptTokens: number, completionTokens: number) => {
    const completionId = randomUUID();
    const costMicroChfValue = costMicroChf({ promptTokens, completionTokens }, prices["tiny-test"]!);
    const recorded = await new UsageRecorder(pool).record(
      usageEvent({
        accountId: account.accountId,
        keyId: account.keyIds[0]!,
        completionId,
        promptTokens,
        completionTokens,
        costMicroChf: costMicroChfValue,
        priceTableVersion: version,
      }).data,
      {},
    );
    if (recorded !== "recorded") throw new Error(`usage of ${completionId} not recorded: ${recorded}`);
    account.completionIds.push(completionId);
  };
  for (const account of accounts) for (let i = 0; i < 3; i++) await charge(account, v1, PRICES_V1, 1000 + i, 2000 + i);
  await checkpointEverything(pool, signer);
  const v2 = await publishPriceTable(pool, "audit-2", PRICES_V2, new Date());
  for (const account of accounts) for (let i = 0; i < 2; i++) await charge(account, v2, PRICES_V2, 3000 + i, 500 + i);
  for (const account of accounts) {
    await executeAccountCommand(accountsWithoutCache(pool), account.accountId, { type: "RevokeKey", keyId: account.keyIds[1]!, now: new Date() });
  }
  await checkpointEverything(pool, signer);
  await rebuildProjections(pool, allProjections);
  return accounts;
}

/**
 * Writes checkpoints until one covers the whole log: a checkpoint covers only transactions older than
 * every one still open on the server, and other databases' transactions count too.
 */
export async function checkpointEverything(pool: Pool, signer: CheckpointSigner | null = null): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    await writeAuditCheckpoints(pool, { signer });
    if ((await uncoveredEvents(pool)) === 0) return;
    if (Date.now() > deadline) throw new Error("no checkpoint covered the whole log within 30 s");
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Events after the last checkpoint's window (the checkpoint stream's own excepted). */
export async function uncoveredEvents(pool: Pool): Promise<number> {
  const last = await pool.query<{ tx: string; gp: string }>(
    "SELECT data->'upTo'->>'transactionId' AS tx, data->'upTo'->>'globalPosition' AS gp FROM es_events WHERE stream_id = 'audit-checkpoints' ORDER BY stream_version DESC LIMIT 1",
  );
  const upTo = last.rows[0] ?? { tx: "0", gp: "0" };
  const uncovered = await pool.query<{ n: string }>(
    "SELECT count(*) AS n FROM es_events WHERE stream_id <> 'audit-checkpoints' AND (transaction_id, global_position) > ($1::xid8, $2::bigint)",
    [upTo.tx, upTo.gp],
  );
  return Number(uncovered.rows[0]!.n);
}
