import { randomUUID } from "node:crypto";
import { PassThrough } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { verifyAudit } from "../../projections/audit/verifyAudit.ts";
import { exportAuditLog } from "../../src/api/admin/exportAuditLog.ts";
import { executeAccountCommand } from "../../src/ledger/accounts/executeAccountCommand.ts";
import { writeAuditCheckpoints } from "../../src/ledger/audit/auditCheckpoint.ts";
import { type CheckpointSigner, checkpointPublicKey, checkpointSignerFromPem, generateCheckpointKeyPair } from "../../src/ledger/audit/checkpointSignature.ts";
import { appendBatchEvent, BATCH_STREAM_TYPE, batchStreamId } from "../../src/ledger/batches/batchEvents.ts";
import { appendToStream } from "../../src/ledger/eventStore/appendToStream.ts";
import { checkExport, parseExportFile } from "../../tools/audit/verifyExport.ts";
import { accountsWithoutCache } from "../support/accountsWithoutCache.ts";
import { createTestDatabase, type TestDatabase } from "../support/testDatabase.ts";
import { uncoveredEvents } from "./auditFixtures.ts";

/**
 * A batch's lifecycle in its account's export: its `batch-<id>` stream belongs to the account (its
 * BatchCreated names it), so a checkpoint signs the stream's head, its last event, as one of the
 * account's; the export holds that event and verifies offline, also for end events written before
 * they carried the account id.
 */
let db: TestDatabase;
let pair: ReturnType<typeof generateCheckpointKeyPair>;
let signer: CheckpointSigner;

type Line = Record<string, unknown> & {
  stream_id?: string;
  version?: number;
  type?: string;
  checkpoint?: number;
  heads?: [string, number, string, unknown][];
  account?: { accountId: string; heads: [string, number, string][] };
};

const COUNTS = { total: 0, completed: 0, failed: 0 };

beforeAll(async () => {
  db = await createTestDatabase();
  pair = generateCheckpointKeyPair();
  signer = checkpointSignerFromPem(pair.privatePem);
}, 120_000);
afterAll(async () => {
  await db.drop();
});

async function newAccount(): Promise<string> {
  const accountId = randomUUID();
  await executeAccountCommand(accountsWithoutCache(db.pool), accountId, {
    type: "RegisterAccount",
    accountId,
    email: `${accountId}@example.test`,
    now: new Date(),
  });
  return accountId;
}

async function subscribe(accountId: string): Promise<void> {
  await executeAccountCommand(accountsWithoutCache(db.pool), accountId, {
    type: "SetSubscription",
    status: "active",
    monthlyBudgetMicroChf: 1_000_000,
    now: new Date(),
  });
}

async function batchCreated(accountId: string): Promise<string> {
  const batchId = `batch_${randomUUID().replaceAll("-", "")}`;
  // Its row, as POST /v1/batches writes it with its BatchCreated.
  await db.pool.query(
    `INSERT INTO batches (id, account_id, key_id, endpoint, input_file_id, completion_window, status, created_at, expires_at)
     VALUES ($1, $2, 'key', '/v1/chat/completions', 'file-x', '24h', 'validating', now(), now() + interval '1 day')`,
    [batchId, accountId],
  );
  await appendBatchEvent(
    db.pool,
    {
      type: "BatchCreated",
      data: {
        batchId,
        accountId,
        keyId: randomUUID(),
        endpoint: "/v1/chat/completions",
        inputFileId: `file-${randomUUID()}`,
        expiresAt: new Date(Date.now() + 86_400_000).toISOString(),
      },
    },
    "api",
  );
  return batchId;
}

/** An end event as it was written before batch lifecycle events carried the account id. */
async function legacyEndEvent(batchId: string, type: "BatchFailed" | "BatchCancelled"): Promise<void> {
  const data = type === "BatchFailed" ? { batchId, errors: 1, counts: COUNTS } : { batchId, counts: COUNTS };
  await appendToStream(db.pool, batchStreamId(batchId), BATCH_STREAM_TYPE, [{ type, data, metadata: { actor: "api" } }], "any");
}

/** Signed checkpoints until the whole log is covered. */
async function checkpoint(): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    await writeAuditCheckpoints(db.pool, { signer });
    if ((await uncoveredEvents(db.pool)) === 0) return;
    if (Date.now() > deadline) throw new Error("no checkpoint covered the whole log within 30 s");
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function exportNdjson(accountId: string, pageSize = 2): Promise<string[]> {
  const out = new PassThrough();
  const chunks: Buffer[] = [];
  out.on("data", (c: Buffer) => chunks.push(c));
  await exportAuditLog(db.pool, accountId, "ndjson", out, pageSize);
  return Buffer.concat(chunks).toString("utf8").trim().split("\n");
}

function check(lines: string[]) {
  const parsed = parseExportFile(`${lines.join("\n")}\n`);
  return checkExport(parsed.entries, parsed.checkpoints, pair.publicPem);
}

function parse(lines: string[]): Line[] {
  return lines.map((l) => JSON.parse(l) as Line);
}

describe("a batch in its account's export", () => {
  it("given a batch created and failed within one checkpoint window, then every lifecycle event names the account and the export verifies offline", async () => {
    const accountId = await newAccount();
    const batchId = await batchCreated(accountId);
    await appendBatchEvent(db.pool, { type: "BatchFailed", data: { batchId, accountId, errors: 1, counts: COUNTS } }, "api");
    await checkpoint();
    const lines = await exportNdjson(accountId);
    const parsed = parse(lines);
    const stream = batchStreamId(batchId);
    expect(parsed.filter((l) => l.stream_id === stream).map((l) => [l.type, (l.data as { accountId?: string }).accountId])).toEqual([
      ["BatchCreated", accountId],
      ["BatchFailed", accountId],
    ]);
    const signed = parsed.filter((l) => "checkpoint" in l).flatMap((c) => c.account!.heads);
    expect(signed).toContainEqual([stream, 2, expect.any(String)]);
    expect(check(lines).problems).toEqual([]);
  });

  it("given the end event written without the account id (before it carried one) in the same window, then the export holds it and verifies offline", async () => {
    const accountId = await newAccount();
    const batchId = await batchCreated(accountId);
    await legacyEndEvent(batchId, "BatchFailed");
    await subscribe(accountId);
    await checkpoint();
    const lines = await exportNdjson(accountId);
    const stream = batchStreamId(batchId);
    expect(
      parse(lines)
        .filter((l) => l.stream_id === stream)
        .map((l) => l.type),
    ).toEqual(["BatchCreated", "BatchFailed"]);
    expect(check(lines).problems).toEqual([]);
    // The event is the account's through its stream's BatchCreated: without it, it is no event of the account.
    const withoutCreated = lines.filter((l) => !(JSON.parse(l).stream_id === stream && JSON.parse(l).version === 1));
    expect(check(withoutCreated).problems).toContainEqual(expect.stringContaining(`${stream} v2: not an event of account ${accountId}`));
    // Nor is an event of the stream that names another account.
    const other = randomUUID();
    const renamed = lines.map((l) => {
      const line = JSON.parse(l) as Line;
      return line.stream_id === stream && line.version === 2 ? JSON.stringify({ ...line, data: { ...(line.data as object), accountId: other } }) : l;
    });
    expect(check(renamed).problems).toContainEqual(expect.stringContaining(`${stream} v2: not an event of account ${accountId}`));
  });

  it("given the end event written without the account id in a later window, between events of the account, then the export holds it and verifies offline", async () => {
    const accountId = await newAccount();
    const batchId = await batchCreated(accountId);
    await checkpoint();
    await subscribe(accountId);
    await legacyEndEvent(batchId, "BatchCancelled");
    const next = await batchCreated(accountId);
    await checkpoint();
    const lines = await exportNdjson(accountId);
    const parsed = parse(lines);
    const stream = batchStreamId(batchId);
    // The later window signs the account's stream and the next batch's as the account's, not the first
    // batch's (no event of it there names the account): its end event lies between their heads.
    const window = parsed.filter((l) => "checkpoint" in l).at(-1)!;
    expect(window.account!.heads.map((h) => h[0]).sort()).toEqual([`account-${accountId}`, batchStreamId(next)].sort());
    const at = parsed.findIndex((l) => l.stream_id === stream && l.type === "BatchCancelled");
    expect(parsed.slice(0, at).some((l) => l.stream_id === `account-${accountId}` && l.version === 2)).toBe(true);
    expect(parsed.slice(at + 1).some((l) => l.stream_id === batchStreamId(next))).toBe(true);
    expect(check(lines).problems).toEqual([]);
    // The log agrees with its signed checkpoints (the accounts roots are still those of the log).
    const report = await verifyAudit(db.pool, { readModels: false, publicKeys: [checkpointPublicKey(pair.publicPem)] });
    expect(report.findings).toEqual([]);
  });
});
