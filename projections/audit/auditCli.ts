import { readFileSync } from "node:fs";
import { mkdir, open, readFile } from "node:fs/promises";
import path from "node:path";
import { parseArgs } from "node:util";
import { loadConfig } from "../../src/config/config.ts";
import { createPool, poolTimeouts } from "../../src/db/createPool.ts";
import { migrate } from "../../src/db/migrate.ts";
import { checkpointPublicKey, generateCheckpointKeyPair } from "../../src/ledger/audit/checkpointSignature.ts";
import { parseAuditTime } from "./auditTime.ts";
import { formatAuditReport } from "./formatAuditReport.ts";
import { SignedHeadsFileSchema, writeSignedHeads } from "./signedHeads.ts";
import { verifyAudit } from "./verifyAudit.ts";

const USAGE = `usage: npm run audit -- verify [--account ID] [--from ISO-TIME] [--to ISO-TIME] [--skip-read-models]
                         [--public-key PEM-FILE ...] [--heads HEADS-FILE ...]
  Walks the hash chains, checkpoints and their signatures, recomputes every charge from the price table
  versions and the read models from the log; with --heads, names every stream whose head signed in a
  checkpoint you kept is gone or rewritten. Exits 1 naming each stream and version that differs, 0 when
  all agree. The public key defaults to AUDIT_PUBLIC_KEY_PATH. --from/--to: ISO 8601 with Z or an offset
  (2026-01-31T00:00:00Z, 2026-01-31T01:00:00+01:00); a time without one is refused.
       npm run audit -- keygen --out DIR
  Writes a new Ed25519 key pair: DIR/audit-signing-key.pem (private, for AUDIT_SIGNING_KEY_PATH of the
  projector only) and DIR/audit-public-key.pem (for auditors).
       npm run audit -- heads --out FILE [--since CHECKPOINT]
  Writes the signed checkpoints (after CHECKPOINT) for an auditor to keep outside the database.`;

/** `--from`/`--to`: a time with Z or an offset (parseAuditTime), never one read in the host's time zone. */
function parseTime(name: string, value: string | undefined): Date | undefined {
  if (value === undefined) return undefined;
  try {
    return parseAuditTime(value);
  } catch (error) {
    throw new UsageError(`--${name}: ${(error as Error).message}`);
  }
}

class UsageError extends Error {}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** `--account`: an account id (a UUID), lower-cased as the log writes it. */
function accountIdOf(value: string): string {
  if (!UUID.test(value)) throw new UsageError(`--account: not an account id (a UUID): ${value}`);
  return value.toLowerCase();
}

/** Reads an input file of the auditor's; one that is missing or not what it should be is a usage error, not a crash. */
function readInput<T>(file: string, what: string, read: () => T): T {
  try {
    return read();
  } catch (error) {
    if (error instanceof UsageError) throw error;
    throw new UsageError(`${file}: not a readable ${what} (${(error as Error).message.split("\n")[0]})`);
  }
}

/** Writes a file that must not exist yet (a key is never overwritten). */
async function writeNew(file: string, text: string, mode: number): Promise<void> {
  const handle = await open(file, "wx", mode).catch((error: unknown) => {
    // One line, not a stack: a key pair is never written over (choose another --out, or move the old one).
    if ((error as { code?: string }).code === "EEXIST") throw new UsageError(`${file} exists already: a key is never overwritten; choose another --out.`);
    throw error;
  });
  try {
    await handle.writeFile(text);
  } finally {
    await handle.close();
  }
}

async function keygen(out: string | undefined): Promise<number> {
  if (!out) throw new UsageError("keygen needs --out DIR");
  await mkdir(out, { recursive: true, mode: 0o700 });
  const pair = generateCheckpointKeyPair();
  const privateFile = path.join(out, "audit-signing-key.pem");
  const publicFile = path.join(out, "audit-public-key.pem");
  await writeNew(privateFile, pair.privatePem, 0o600);
  await writeNew(publicFile, pair.publicPem, 0o644);
  process.stdout.write(
    `key id:      ${pair.keyId}\nprivate key: ${privateFile} (AUDIT_SIGNING_KEY_PATH of the projector; keep it off the database host and out of backups of the database)\npublic key:  ${publicFile} (give it to your auditors; AUDIT_PUBLIC_KEY_PATH or --public-key of verify)\n`,
  );
  return 0;
}

async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      account: { type: "string" },
      from: { type: "string" },
      to: { type: "string" },
      "skip-read-models": { type: "boolean", default: false },
      "public-key": { type: "string", multiple: true },
      heads: { type: "string", multiple: true },
      out: { type: "string" },
      since: { type: "string" },
      help: { type: "boolean", default: false },
    },
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const command = positionals[0];
  if (positionals.length !== 1 || !["verify", "keygen", "heads"].includes(command!)) throw new UsageError(USAGE);
  if (command === "keygen") return keygen(values.out);
  // Checked before anything is opened: a bad time is a usage error, whatever the database.
  const scope = {
    ...(values.account !== undefined ? { accountId: accountIdOf(values.account) } : {}),
    ...(values.from ? { from: parseTime("from", values.from)! } : {}),
    ...(values.to ? { to: parseTime("to", values.to)! } : {}),
  };
  if (scope.from && scope.to && scope.from > scope.to) throw new UsageError("--from is after --to: the time range is empty");
  const config = loadConfig(process.env);
  // An operator tool: no statement limit, and no idle-in-transaction limit (it holds one snapshot open
  // across a whole log while a second connection or the process itself works).
  const pool = createPool(config.databaseUrl, 2, { timeouts: { ...poolTimeouts(config, "background"), statementMs: 0, queryMs: 0, idleInTransactionMs: 0 } });
  try {
    await migrate(pool);
    if (command === "heads") {
      if (!values.out) throw new UsageError("heads needs --out FILE");
      const since = values.since === undefined ? 0 : Number(values.since);
      if (!Number.isInteger(since) || since < 0) throw new UsageError(`--since is not a checkpoint number: ${values.since}`);
      const handle = await open(values.out, "w", 0o644);
      const stream = handle.createWriteStream();
      const counts = await writeSignedHeads(pool, stream, since);
      await new Promise<void>((resolve, reject) => stream.end((error?: Error | null) => (error ? reject(error) : resolve())));
      process.stdout.write(
        `${counts.checkpoints} signed checkpoint(s) written to ${values.out}` +
          (counts.skippedUnsigned ? ` (${counts.skippedUnsigned} unsigned left out)` : "") +
          "\nKeep it outside the database (an auditor's own storage, or publish it); verify with --heads.\n",
      );
      return counts.checkpoints ? 0 : 1;
    }
    const keyFiles = values["public-key"] ?? (config.auditPublicKeyPath ? [config.auditPublicKeyPath] : []);
    const publicKeys = keyFiles.map((file) => readInput(file, "public key", () => checkpointPublicKey(readFileSync(file, "utf8"))));
    const signedHeads = await Promise.all(
      (values.heads ?? []).map(async (file) => {
        const text = await readFile(file, "utf8").catch((error: unknown) => {
          throw new UsageError(`--heads ${file}: cannot read it (${(error as Error).message})`);
        });
        return readInput(file, "signed heads file (npm run audit -- heads)", () => SignedHeadsFileSchema.parse(JSON.parse(text)));
      }),
    );
    const report = await verifyAudit(pool, {
      ...scope,
      readModels: !values["skip-read-models"],
      publicKeys,
      ...(signedHeads.length ? { signedHeads } : {}),
    });
    // A scope that holds nothing checked nothing: not a clean audit (an account id mistyped, say), and no "OK" is printed.
    if (report.findingCount === 0 && report.chains.events === 0 && (scope.accountId || scope.from || scope.to)) {
      throw new UsageError(
        `nothing was verified: the log holds no event${scope.accountId ? ` of account ${scope.accountId}` : ""}${scope.from || scope.to ? " in that time range" : ""}`,
      );
    }
    process.stdout.write(formatAuditReport(report));
    return report.findingCount === 0 ? 0 : 1;
  } finally {
    await pool.end();
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    if (error instanceof UsageError || (error as { code?: string }).code?.startsWith("ERR_PARSE_ARGS")) {
      process.stderr.write(`${(error as Error).message}\n`);
      process.exit(2);
    }
    process.stderr.write(`audit failed: ${(error as Error).stack ?? String(error)}\n`);
    process.exit(2);
  },
);
