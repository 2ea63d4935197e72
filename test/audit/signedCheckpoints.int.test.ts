import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { PassThrough } from "node:stream";
import { randomUUID } from "node:crypto";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { AuditCheckpointer } from "../../projections/auditCheckpointer.ts";
import { type SignedHeadsFile, SignedHeadsFileSchema, writeSignedHeads } from "../../projections/audit/signedHeads.ts";
import { verifyAudit } from "../../projections/audit/verifyAudit.ts";
import { AUDIT_CHECKPOINT_STREAM, AuditCheckpointRecordedDataSchema } from "../../src/ledger/audit/auditCheckpoint.ts";
import { type CheckpointSigner, checkpointPublicKey, checkpointSignerFromPem, generateCheckpointKeyPair } from "../../src/ledger/audit/checkpointSignature.ts";
import { merkleRoot, type StreamHead } from "../../src/ledger/audit/merkleRoot.ts";
import { appendToStream } from "../../src/ledger/eventStore/appendToStream.ts";
import { completionStreamId } from "../../src/ledger/usageRecordedEvent.ts";
import { silentLogger } from "../../src/observability/logger.ts";
import { eventuallyTrue } from "../support/eventually.ts";
import { createTestDatabase, type TestDatabase } from "../support/testDatabase.ts";
import { costMicroChf } from "../../src/ledger/pricing/costMicroChf.ts";
import { buildAuditedLog, PRICES_V1, uncoveredEvents, type AuditedAccount } from "./auditFixtures.ts";
import { deleteStream, recomputeCheckpointsAndReadModels, rewriteEventAndChain } from "./operatorRewrite.ts";
import { rewriteCheckpoint } from "./rewriteCheckpoint.ts";

/**
 * Signed checkpoints against an operator who can write to the database but does not hold the signing
 * key: whatever they recompute (event hashes, chains, the log's own checkpoints, the read models), the
 * signed heads an auditor kept outside the database name the stream, and a checkpoint changed in place
 * no longer verifies.
 */
let db: TestDatabase;
let accounts: AuditedAccount[];
let signer: CheckpointSigner;
let publicPem: string;

beforeEach(async () => {
  db = await createTestDatabase();
  const pair = generateCheckpointKeyPair();
  signer = checkpointSignerFromPem(pair.privatePem);
  publicPem = pair.publicPem;
  accounts = await buildAuditedLog(db.pool, 2, signer);
});
afterEach(async () => {
  await db.drop();
});

/** What an auditor keeps: `npm run audit -- heads` written out and read back. */
async function keepSignedHeads(): Promise<SignedHeadsFile> {
  const out = new PassThrough();
  const chunks: Buffer[] = [];
  out.on("data", (c: Buffer) => chunks.push(c));
  await writeSignedHeads(db.pool, out);
  out.end();
  return SignedHeadsFileSchema.parse(JSON.parse(Buffer.concat(chunks).toString("utf8")));
}

describe("signed checkpoints", () => {
  it("an untouched log: every checkpoint signed and verified with the auditor's key, the kept heads agree", async () => {
    const heads = await keepSignedHeads();
    expect(heads.checkpoints.length).toBeGreaterThanOrEqual(2);
    const report = await verifyAudit(db.pool, { publicKeys: [checkpointPublicKey(publicPem)], signedHeads: [heads], readModels: false });
    expect(report.findings).toEqual([]);
    expect(report.checkpoints.signed).toBe(report.checkpoints.checkpoints);
    expect(report.checkpoints.keyIds).toEqual([signer.keyId]);
    expect(report.signedHeads!.streams).toBeGreaterThanOrEqual(2 + 10);
  });

  it("given an event rewritten with its chain, the log's checkpoints and the read models recomputed, when verified with the kept signed heads, then the stream is named as rewritten", async () => {
    const heads = await keepSignedHeads();
    const stream = completionStreamId(accounts[0]!.completionIds[1]!);
    // A charge made smaller, consistently: tokens, cost at its price table version, and the budget spent.
    let refunded = 0;
    await rewriteEventAndChain(db.pool, stream, 1, (data) => {
      data.promptTokens = 10;
      data.completionTokens = 0;
      const cost = costMicroChf({ promptTokens: 10, completionTokens: 0 }, PRICES_V1["tiny-test"]!);
      refunded = (data.costMicroChf as number) - cost;
      data.costMicroChf = cost;
    });
    await db.pool.query("UPDATE rm_budget SET spent_micro_chf = spent_micro_chf - $2 WHERE account_id = $1", [accounts[0]!.accountId, refunded]);
    await recomputeCheckpointsAndReadModels(db.pool);
    // The log is consistent with itself again: without the signed heads nothing names the stream.
    const unaided = await verifyAudit(db.pool, { readModels: true });
    expect(unaided.findings).toEqual([]);
    const report = await verifyAudit(db.pool, { publicKeys: [checkpointPublicKey(publicPem)], signedHeads: [heads], readModels: true });
    expect(report.findings).toContainEqual(
      expect.objectContaining({ kind: "signed-head", streamId: stream, version: 1, message: expect.stringContaining("rewritten") }),
    );
    // The rewritten checkpoints are unsigned: with the key given, that is named too.
    expect(report.findings).toContainEqual(expect.objectContaining({ kind: "signature", message: expect.stringContaining("unsigned") }));
  });

  it("given a whole stream deleted and everything recomputed, when verified with the kept signed heads, then the stream is named as gone", async () => {
    const heads = await keepSignedHeads();
    const stream = completionStreamId(accounts[1]!.completionIds[0]!);
    const account = `account-${accounts[1]!.accountId}`;
    await deleteStream(db.pool, stream);
    await deleteStream(db.pool, account);
    await recomputeCheckpointsAndReadModels(db.pool);
    const unaided = await verifyAudit(db.pool, { readModels: true });
    expect(unaided.findings.filter((f) => f.streamId === stream || f.streamId === account)).toEqual([]);
    const report = await verifyAudit(db.pool, { publicKeys: [checkpointPublicKey(publicPem)], signedHeads: [heads], readModels: true });
    for (const gone of [stream, account])
      expect(report.findings).toContainEqual(
        expect.objectContaining({ kind: "signed-head", streamId: gone, message: expect.stringContaining("the stream is gone from the log") }),
      );
  });

  it("given a checkpoint's heads changed in place (root and chain recomputed), then its signature fails; a stripped or foreign signature is named too", async () => {
    const stream = completionStreamId(accounts[0]!.completionIds[0]!);
    await rewriteCheckpoint(db.pool, 1, (data) => {
      const heads = data.heads as StreamHead[];
      const i = heads.findIndex((h) => h[0] === stream);
      heads[i] = [stream, 1, "0".repeat(64)];
      data.merkleRoot = merkleRoot(heads);
    });
    const withKey = await verifyAudit(db.pool, { publicKeys: [checkpointPublicKey(publicPem)], readModels: false });
    expect(withKey.findings).toContainEqual(
      expect.objectContaining({ kind: "signature", streamId: AUDIT_CHECKPOINT_STREAM, version: 1, message: expect.stringContaining("does not verify") }),
    );
    // Even without the auditor's key, the key the checkpoint carries shows the change.
    const withoutKey = await verifyAudit(db.pool, { readModels: false });
    expect(withoutKey.findings).toContainEqual(expect.objectContaining({ kind: "signature", version: 1, message: expect.stringContaining("does not verify") }));

    const other = checkpointSignerFromPem(generateCheckpointKeyPair().privatePem);
    await rewriteCheckpoint(db.pool, 1, (data) => {
      data.signature = other.sign("anything");
    });
    const foreign = await verifyAudit(db.pool, { publicKeys: [checkpointPublicKey(publicPem)], readModels: false });
    expect(foreign.findings).toContainEqual(
      expect.objectContaining({ kind: "signature", version: 1, message: expect.stringContaining("not a key you trust") }),
    );
    const last = Number((await db.pool.query("SELECT version FROM es_streams WHERE stream_id = $1", [AUDIT_CHECKPOINT_STREAM])).rows[0].version);
    await rewriteCheckpoint(db.pool, last, (data) => {
      delete data.signature;
    });
    const stripped = await verifyAudit(db.pool, { publicKeys: [checkpointPublicKey(publicPem)], readModels: false });
    expect(stripped.findings).toContainEqual(expect.objectContaining({ kind: "signature", message: expect.stringContaining("unsigned") }));
  });
});

describe("npm run audit -- keygen | heads | verify", () => {
  const ROOT = new URL("../../", import.meta.url).pathname;
  const cli = (args: string[]) =>
    new Promise<{ code: number; stdout: string; stderr: string }>((resolve) =>
      execFile(
        process.execPath,
        ["projections/audit/auditCli.ts", ...args],
        { cwd: ROOT, env: { ...process.env, DATABASE_URL: db.url, AUDIT_PUBLIC_KEY_PATH: "" } },
        (error, stdout, stderr) => resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      ),
    );

  it("writes a key pair (never over an existing one), the signed heads, and verify names a rewritten stream from them", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "audit-cli-"));
    try {
      const keygen = await cli(["keygen", "--out", path.join(dir, "keys")]);
      expect(keygen.code, keygen.stderr).toBe(0);
      const generated = checkpointSignerFromPem(await readFile(path.join(dir, "keys", "audit-signing-key.pem"), "utf8"));
      expect(keygen.stdout).toContain(generated.keyId);
      expect(checkpointPublicKey(await readFile(path.join(dir, "keys", "audit-public-key.pem"), "utf8")).keyId).toBe(generated.keyId);
      expect((await stat(path.join(dir, "keys", "audit-signing-key.pem"))).mode & 0o077).toBe(0);
      const again = await cli(["keygen", "--out", path.join(dir, "keys")]);
      expect(again.code).toBe(2);
      // One line that says why, not a stack trace.
      expect(again.stderr.trim()).toBe(`${path.join(dir, "keys", "audit-signing-key.pem")} exists already: a key is never overwritten; choose another --out.`);

      const headsFile = path.join(dir, "heads.json");
      const heads = await cli(["heads", "--out", headsFile]);
      expect(heads.code, heads.stderr).toBe(0);
      const publicFile = path.join(dir, "public.pem");
      await writeFile(publicFile, publicPem);
      const clean = await cli(["verify", "--skip-read-models", "--public-key", publicFile, "--heads", headsFile]);
      expect(clean.code, clean.stdout + clean.stderr).toBe(0);
      expect(clean.stdout).toMatch(/signatures: +\d+ signed by ed25519:[0-9a-f]{32}, 0 unsigned; checked against the public key\(s\) you gave/);

      const stream = `account-${accounts[0]!.accountId}`;
      await rewriteEventAndChain(db.pool, stream, 3, (data) => {
        data.name = "renamed later";
      });
      await recomputeCheckpointsAndReadModels(db.pool);
      const plain = await cli(["verify", "--skip-read-models"]);
      expect(plain.stdout).toContain("UNSIGNED checkpoints");
      const caught = await cli(["verify", "--skip-read-models", "--public-key", publicFile, "--heads", headsFile]);
      expect(caught.code).toBe(1);
      expect(caught.stdout).toMatch(new RegExp(`FAIL signed-head ${stream} v\\d+: rewritten`));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 120_000);
});

describe("checkpoint cadence", () => {
  it("writes a signed checkpoint as soon as N events are uncovered, and not before, with no timer", async () => {
    const append = async (n: number) => {
      for (let i = 0; i < n; i++) await appendToStream(db.pool, `test-${randomUUID()}`, "test", [{ type: "Noted", data: { i } }], "no_stream");
    };
    const settled = (n: number) => eventuallyTrue(async () => (await uncoveredEvents(db.pool)) === n, 30_000);
    const checkpoints = async () =>
      (await db.pool.query("SELECT data FROM es_events WHERE stream_id = $1 ORDER BY stream_version", [AUDIT_CHECKPOINT_STREAM])).rows.map((r) =>
        AuditCheckpointRecordedDataSchema.parse(r.data),
      );
    const before = (await checkpoints()).length;
    const checkpointer = new AuditCheckpointer({ pool: db.pool, logger: silentLogger, intervalMs: 0, everyEvents: 5, pollMs: 50, signer });
    checkpointer.start();
    try {
      await append(4);
      expect(await settled(4)).toBe(true);
      await new Promise((r) => setTimeout(r, 500));
      expect(await uncoveredEvents(db.pool)).toBe(4);
      await append(1);
      expect(await eventuallyTrue(async () => (await uncoveredEvents(db.pool)) === 0, 30_000)).toBe(true);
    } finally {
      await checkpointer.stop();
    }
    const written = (await checkpoints()).slice(before);
    expect(written.map((c) => c.eventCount)).toEqual([5]);
    expect(written[0]!.signature?.keyId).toBe(signer.keyId);
  });

  it("by time: a checkpoint every interval whatever the count", async () => {
    await appendToStream(db.pool, `test-${randomUUID()}`, "test", [{ type: "Noted", data: {} }], "no_stream");
    const checkpointer = new AuditCheckpointer({ pool: db.pool, logger: silentLogger, intervalMs: 100, everyEvents: 1000, pollMs: 20 });
    checkpointer.start();
    try {
      expect(await eventuallyTrue(async () => (await uncoveredEvents(db.pool)) === 0, 30_000)).toBe(true);
    } finally {
      await checkpointer.stop();
    }
  });
});
