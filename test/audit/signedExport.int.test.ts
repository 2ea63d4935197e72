import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { PassThrough } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { exportAuditLog } from "../../src/api/admin/exportAuditLog.ts";
import {
  type CheckpointStatementFields,
  checkpointSignerFromPem,
  checkpointStatement,
  generateCheckpointKeyPair,
} from "../../src/ledger/audit/checkpointSignature.ts";
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

type Line = Record<string, unknown> & {
  checkpoint?: number;
  heads?: [string, number, string, unknown][];
  account?: { accountId: string; heads: [string, number, string][] };
};

async function runVerifier(exportLines: string[], name: string): Promise<{ code: number; stdout: string }> {
  const file = path.join(dir, name);
  await writeFile(file, `${exportLines.join("\n")}\n`);
  await writeFile(path.join(dir, "public.pem"), pair.publicPem);
  return new Promise((resolve) =>
    execFile(process.execPath, ["tools/audit/verifyExport.ts", file, "--public-key", path.join(dir, "public.pem")], { cwd: ROOT }, (error, stdout) =>
      resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout }),
    ),
  );
}

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

describe("signed export: the account's streams per checkpoint (audit-checkpoint/2)", () => {
  it("given an untouched export, then each checkpoint line carries the account's signed list of streams, and it verifies", async () => {
    const checkpoints = lines.map((l) => JSON.parse(l) as Line).filter((l) => "checkpoint" in l);
    for (const c of checkpoints) {
      expect(c.accountsRoot).toMatch(/^[0-9a-f]{64}$/);
      expect(c.account!.accountId).toBe(accounts[0]!.accountId);
      expect(c.account!.heads.map((h) => h[0])).toEqual(c.heads!.map((h) => h[0]));
    }
    const listed = checkpoints.flatMap((c) => c.account!.heads.map((h) => h[0]));
    for (const completionId of accounts[0]!.completionIds) expect(listed).toContain(completionStreamId(completionId));
    const result = check(lines, pair.publicPem);
    expect(result.problems).toEqual([]);
    expect(result.withoutAccountsRoot).toBe(0);
    const cli = await runVerifier(lines, "untouched.ndjson");
    expect(cli.code, cli.stdout).toBe(0);
    expect(cli.stdout).not.toContain("note:");
  });

  it("given a charge line removed together with its head proof from the checkpoint line, then the offline check fails naming the stream", async () => {
    const removed = lines.findIndex((l) => JSON.parse(l).type === "UsageRecorded");
    const stream = JSON.parse(lines[removed]!).stream_id as string;
    const at = lines.findIndex((l) => (JSON.parse(l) as Line).heads?.some((h) => h[0] === stream));
    const line = JSON.parse(lines[at]!) as Line;
    line.heads = line.heads!.filter((h) => h[0] !== stream);
    const tampered = lines.flatMap((l, i) => (i === removed ? [] : i === at ? [JSON.stringify(line)] : [l]));
    const result = check(tampered, pair.publicPem);
    expect(result.problems).toContainEqual(
      expect.stringMatching(
        new RegExp(
          `checkpoint ${line.checkpoint}: ${stream} v1: signed as one of the account's streams in the window, but the export does not hold this event`,
        ),
      ),
    );
    const cli = await runVerifier(tampered, "charge-and-proof-removed.ndjson");
    expect(cli.code).toBe(1);
    expect(cli.stdout).toContain(`${stream} v1: signed as one of the account's streams`);
  });

  it("given the stream also removed from the line's signed list of the account's streams, then the accounts root does not match and the check fails", () => {
    const removed = lines.findIndex((l) => JSON.parse(l).type === "UsageRecorded");
    const stream = JSON.parse(lines[removed]!).stream_id as string;
    const at = lines.findIndex((l) => (JSON.parse(l) as Line).heads?.some((h) => h[0] === stream));
    const line = JSON.parse(lines[at]!) as Line;
    line.heads = line.heads!.filter((h) => h[0] !== stream);
    line.account!.heads = line.account!.heads.filter((h) => h[0] !== stream);
    const tampered = lines.flatMap((l, i) => (i === removed ? [] : i === at ? [JSON.stringify(line)] : [l]));
    expect(check(tampered, pair.publicPem).problems).toContainEqual(
      expect.stringContaining(`checkpoint ${line.checkpoint}: the account's list of streams is not the one the checkpoint signed`),
    );
    // Nor can the accounts root be dropped to pass the line off as an audit-checkpoint/1 one.
    delete line.accountsRoot;
    delete line.account;
    const downgraded = lines.flatMap((l, i) => (i === removed ? [] : i === at ? [JSON.stringify(line)] : [l]));
    expect(check(downgraded, pair.publicPem).problems).toContainEqual(expect.stringContaining(`checkpoint ${line.checkpoint}: the signature does not verify`));
  });

  it("given a charge of a later window moved inside an earlier window's lines, then the check names it as not signed there", () => {
    const parsed = lines.map((l) => JSON.parse(l) as Line);
    const [first, second] = parsed.filter((l) => "checkpoint" in l);
    const firstStreams = new Set(first!.account!.heads.map((h) => h[0]));
    const late = parsed.findIndex((l) => l.type === "UsageRecorded" && second!.account!.heads.some((h) => h[0] === l.stream_id));
    const lastOfFirst = parsed.findLastIndex((l) => l.type === "UsageRecorded" && firstStreams.has(l.stream_id as string));
    expect(late).toBeGreaterThan(lastOfFirst);
    const moved = [...lines];
    const [line] = moved.splice(late, 1);
    moved.splice(lastOfFirst, 0, line!);
    expect(check(moved, pair.publicPem).problems).toContainEqual(
      // Which window it lands in depends on how the log's windows fell (another account's checkpoint may
      // lie between); it is named as lying inside one that does not sign it.
      expect.stringMatching(new RegExp(`${parsed[late]!.stream_id} v1: lies inside the window of checkpoint \\d+, which does not sign it`)),
    );
  });

  it("given a checkpoint signed as audit-checkpoint/1 (before accounts roots), then it still verifies, and the summary says what it cannot prove", async () => {
    const signer = checkpointSignerFromPem(pair.privatePem);
    const legacy = lines.map((l) => {
      const line = JSON.parse(l) as Line;
      if (!("checkpoint" in line)) return l;
      const { accountsRoot: _root, account: _account, ...v1 } = line;
      const fields = v1 as unknown as CheckpointStatementFields;
      return JSON.stringify({ ...v1, signature: signer.sign(checkpointStatement(line.checkpoint!, fields)) });
    });
    expect(checkpointStatement(1, JSON.parse(legacy.find((l) => l.includes('"checkpoint"'))!))).toContain('"statement":"audit-checkpoint/1"');
    const result = check(legacy, pair.publicPem);
    expect(result.problems).toEqual([]);
    expect(result.withoutAccountsRoot).toBe(result.checkpoints);
    const cli = await runVerifier(legacy, "v1.ndjson");
    expect(cli.code, cli.stdout).toBe(0);
    expect(cli.stdout).toContain("signed as audit-checkpoint/1 (no accounts root)");
  });

  it("given a checkpoint covering two accounts, then each account's export passes alone and shows no stream of the other", async () => {
    const other = await exportNdjson(accounts[1]!.accountId);
    const cps = (ls: string[]) =>
      new Map(
        ls
          .map((l) => JSON.parse(l) as Line)
          .filter((l) => "checkpoint" in l)
          .map((c) => [c.checkpoint!, c]),
      );
    const mine = cps(lines);
    const theirs = cps(other);
    const shared = [...mine.keys()].filter((n) => theirs.has(n));
    expect(shared.length).toBeGreaterThanOrEqual(1);
    for (const n of shared) {
      expect(mine.get(n)!.accountsRoot).toBe(theirs.get(n)!.accountsRoot);
      expect(mine.get(n)!.account!.accountId).toBe(accounts[0]!.accountId);
      expect(theirs.get(n)!.account!.accountId).toBe(accounts[1]!.accountId);
    }
    for (const [exportLines, own, foreign] of [
      [lines, accounts[0]!, accounts[1]!],
      [other, accounts[1]!, accounts[0]!],
    ] as const) {
      expect(check([...exportLines], pair.publicPem).problems).toEqual([]);
      const text = exportLines.join("\n");
      expect(text).toContain(own.accountId);
      expect(text).not.toContain(foreign.accountId);
      for (const id of [...foreign.completionIds, ...foreign.keyIds]) expect(text).not.toContain(id);
    }
  });
});
