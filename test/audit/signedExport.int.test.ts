import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { PassThrough } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { exportAuditLog } from "../../src/api/admin/exportAuditLog.ts";
import { checkpointSignerFromPem, generateCheckpointKeyPair } from "../../src/ledger/audit/checkpointSignature.ts";
import { completionStreamId } from "../../src/ledger/usageRecordedEvent.ts";
import { checkExport, parseExportFile } from "../../tools/audit/verifyExport.ts";
import { createTestDatabase, type TestDatabase } from "../support/testDatabase.ts";
import { buildAuditedLog, type AuditedAccount } from "./auditFixtures.ts";

/**
 * The offline check of an account's export with signed checkpoints: the export carries, per signed
 * checkpoint, the account's stream heads with their Merkle paths; a charge removed from the export (or
 * a checkpoint line changed, or signed by another key) fails the check.
 */
const ROOT = new URL("../../", import.meta.url).pathname;
let db: TestDatabase;
let accounts: AuditedAccount[];
let pair: ReturnType<typeof generateCheckpointKeyPair>;
let dir: string;
let lines: string[];

async function exportNdjson(accountId: string): Promise<string[]> {
  const out = new PassThrough();
  const chunks: Buffer[] = [];
  out.on("data", (c: Buffer) => chunks.push(c));
  await exportAuditLog(db.pool, accountId, "ndjson", out, 3);
  return Buffer.concat(chunks).toString("utf8").trim().split("\n");
}

function check(exportLines: string[], publicKeyPem?: string) {
  const parsed = parseExportFile(`${exportLines.join("\n")}\n`);
  return checkExport(parsed.entries, parsed.checkpoints, publicKeyPem);
}

beforeAll(async () => {
  db = await createTestDatabase();
  dir = await mkdtemp(path.join(tmpdir(), "signed-export-"));
  pair = generateCheckpointKeyPair();
  accounts = await buildAuditedLog(db.pool, 2, checkpointSignerFromPem(pair.privatePem));
  lines = await exportNdjson(accounts[0]!.accountId);
}, 120_000);
afterAll(async () => {
  await db.drop();
  await rm(dir, { recursive: true, force: true });
});

describe("signed export", () => {
  it("carries the signed checkpoints with the account's own heads only, and verifies offline with the pinned key", async () => {
    const checkpoints = lines.map((l) => JSON.parse(l)).filter((l) => "checkpoint" in l);
    expect(checkpoints.length).toBeGreaterThanOrEqual(2);
    const headStreams = checkpoints.flatMap((c) => c.heads.map((h: unknown[]) => h[0]));
    for (const completionId of accounts[0]!.completionIds) expect(headStreams).toContain(completionStreamId(completionId));
    expect(lines.join("\n")).not.toContain(accounts[1]!.accountId);
    for (const completionId of accounts[1]!.completionIds) expect(lines.join("\n")).not.toContain(completionId);
    const result = check(lines, pair.publicPem);
    expect(result.problems).toEqual([]);
    expect(result.keyIds).toEqual([pair.keyId]);
    expect(result.pinned).toBe(true);

    const file = path.join(dir, "ok.ndjson");
    await writeFile(file, `${lines.join("\n")}\n`);
    await writeFile(path.join(dir, "public.pem"), pair.publicPem);
    const cli = await new Promise<{ code: number; stdout: string }>((resolve) =>
      execFile(process.execPath, ["tools/audit/verifyExport.ts", file, "--public-key", path.join(dir, "public.pem")], { cwd: ROOT }, (error, stdout) =>
        resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout }),
      ),
    );
    expect(cli.code, cli.stdout).toBe(0);
    expect(cli.stdout).toMatch(new RegExp(`signed checkpoint\\(s\\) by ${pair.keyId} \\(the key you gave\\): OK`));
  });

  it("given a charge (a whole completion stream's only line) removed from the export, then the offline check names it", () => {
    const removed = lines.findIndex((l) => JSON.parse(l).type === "UsageRecorded");
    const stream = JSON.parse(lines[removed]!).stream_id as string;
    const without = lines.filter((_, i) => i !== removed);
    // The chains alone cannot tell: the stream had one event.
    const parsed = parseExportFile(`${without.join("\n")}\n`);
    expect(checkExport(parsed.entries).problems).toEqual([]);
    const result = check(without, pair.publicPem);
    expect(result.problems).toContainEqual(
      expect.stringMatching(new RegExp(`checkpoint \\d+: ${stream} v1: signed by the checkpoint, but the export does not hold this event \\(removed\\)`)),
    );
  });

  it("given a checkpoint line changed, or signed by another key than the pinned one, then the check fails", () => {
    const at = lines.findIndex((l) => "checkpoint" in JSON.parse(l));
    const changed = JSON.parse(lines[at]!);
    changed.eventCount += 1;
    const tampered = lines.map((l, i) => (i === at ? JSON.stringify(changed) : l));
    expect(check(tampered, pair.publicPem).problems).toContainEqual(expect.stringContaining("the signature does not verify"));
    expect(check(lines, generateCheckpointKeyPair().publicPem).problems).toContainEqual(expect.stringContaining("not the key you gave"));
  });
});
