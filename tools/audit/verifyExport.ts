/**
 * Offline check of an audit export (NDJSON or CSV, from `GET /api/v1/accounts/user/audit-log` or
 * `npm run admin -- export`): recomputes every event's hash and follows each stream's chain; verifies
 * the Ed25519 signature of every signed checkpoint line (NDJSON), the Merkle path of each stream head it
 * signs, and that the export holds every signed head (so a removed or changed event shows). An
 * audit-checkpoint/2 line also proves (a Merkle path to its signed accounts root) that its heads are
 * every stream of the account in its window, so a charge removed together with its head shows too.
 *
 *   node tools/audit/verifyExport.ts export.ndjson [--public-key audit-public-key.pem]     (or export.csv)
 *
 * Self-contained on purpose (Node's own modules only), so an auditor can read all of it and run it on
 * any machine with Node 22.18 or later (which runs TypeScript directly). The hash is SHA-256 over the
 * RFC 8785 canonical JSON of { prevHash, streamId, streamVersion, eventId, type, schemaVersion, data,
 * metadata, recordedAt } (docs/audit.md). Exit status 0 when every line verifies, 1 naming each line that does not, 2 when
 * the file cannot be read.
 */
import { createHash, createPublicKey, type KeyObject, verify } from "node:crypto";
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

type Entry = {
  stream_id: string;
  version: number;
  event_id: string;
  type: string;
  schema_version: number;
  recorded_at: string;
  data: unknown;
  metadata: unknown;
  prev_hash: string | null;
  hash: string | null;
};

/** A signed checkpoint line: the signed fields, the signature and the account's heads with Merkle paths. */
type CheckpointLine = {
  checkpoint: number;
  after: unknown;
  upTo: unknown;
  eventCount: number;
  streamCount: number;
  merkleRoot: string;
  /** audit-checkpoint/2: the root of the accounts tree (leaf: [accountId, [[streamId, version, hash]...]]). */
  accountsRoot?: string;
  signature: { alg: string; keyId: string; publicKey: string; value: string };
  heads: [string, number, string, ["L" | "R", string][]][];
  /** audit-checkpoint/2: the account's leaf [accountId, heads] (all its streams in the window) and its path to accountsRoot. */
  account?: { accountId: string; heads: [string, number, string][]; path: ["L" | "R", string][] };
};

export type ExportCheck = {
  lines: number;
  streams: number;
  unhashed: number;
  checkpoints: number;
  /** Checkpoint lines signed as audit-checkpoint/1: no accounts root, so they cannot prove the account's streams are all there. */
  withoutAccountsRoot: number;
  keyIds: string[];
  /** Whether the signatures were checked against a key the auditor gave (--public-key). */
  pinned: boolean;
  problems: string[];
};

function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== "object") {
    if (typeof value === "number" && !Number.isFinite(value)) throw new TypeError("not a JSON number");
    return JSON.stringify(value);
  }
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  const keys = Object.keys(value).sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`).join(",")}}`;
}

function hashOf(e: Entry): string {
  const canonical = canonicalJson({
    prevHash: e.prev_hash,
    streamId: e.stream_id,
    streamVersion: e.version,
    eventId: e.event_id,
    type: e.type,
    schemaVersion: e.schema_version,
    data: e.data,
    metadata: e.metadata,
    recordedAt: e.recorded_at,
  });
  return createHash("sha256").update(canonical, "utf8").digest("hex");
}

/** RFC 4180 records (quoted fields may hold commas, quotes and line breaks). */
function csvRecords(text: string): string[][] {
  const records: string[][] = [];
  let field = "";
  let record: string[] = [];
  let quoted = false;
  const endRecord = () => {
    record.push(field);
    records.push(record);
    field = "";
    record = [];
  };
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') {
        field += '"';
        i++;
      } else if (c === '"') quoted = false;
      else field += c;
    } else if (c === '"') quoted = true;
    else if (c === ",") {
      record.push(field);
      field = "";
    } else if (c === "\n" || c === "\r") {
      if (c === "\r" && text[i + 1] === "\n") i++;
      endRecord();
    } else field += c;
  }
  if (field !== "" || record.length) endRecord();
  return records;
}

/** The entries of an export file's text, with their line (NDJSON) or record (CSV, header = 1) numbers. */
export function parseExport(text: string): { line: number; entry: Entry }[] {
  return parseExportFile(text).entries;
}

/** Entries and signed checkpoint lines (NDJSON lines with a "checkpoint" member) of an export file. */
export function parseExportFile(text: string): { entries: { line: number; entry: Entry }[]; checkpoints: { line: number; checkpoint: CheckpointLine }[] } {
  const all = parseLines(text);
  return {
    entries: all.filter((l): l is { line: number; entry: Entry } => "entry" in l),
    checkpoints: all.filter((l): l is { line: number; checkpoint: CheckpointLine } => "checkpoint" in l),
  };
}

function parseLines(text: string): ({ line: number; entry: Entry } | { line: number; checkpoint: CheckpointLine })[] {
  if (text.startsWith("stream_id,")) {
    const [header, ...rows] = csvRecords(text);
    return rows.map((cells, i) => {
      const raw = Object.fromEntries(header!.map((h, j) => [h, cells[j] ?? ""]));
      return {
        line: i + 2,
        entry: {
          stream_id: raw.stream_id!,
          version: Number(raw.version),
          event_id: raw.event_id!,
          type: raw.type!,
          schema_version: Number(raw.schema_version),
          recorded_at: raw.recorded_at!,
          data: JSON.parse(raw.data!),
          metadata: JSON.parse(raw.metadata!),
          prev_hash: raw.prev_hash || null,
          hash: raw.hash || null,
        },
      };
    });
  }
  return text
    .split("\n")
    .map((l, i) => ({ l, line: i + 1 }))
    .filter(({ l }) => l.trim() !== "")
    .map(({ l, line }) => {
      const value = JSON.parse(l) as Entry | CheckpointLine;
      return "checkpoint" in value ? { line, checkpoint: value } : { line, entry: value };
    });
}

/** "ed25519:" and the first 32 hex digits of SHA-256 of the key's DER SubjectPublicKeyInfo. */
function keyIdOf(key: KeyObject): string {
  return `ed25519:${createHash("sha256")
    .update(key.export({ type: "spki", format: "der" }))
    .digest("hex")
    .slice(0, 32)}`;
}

function sha256(...parts: (string | Buffer)[]): Buffer {
  const h = createHash("sha256");
  for (const p of parts) h.update(p);
  return h.digest();
}

/** The Merkle root a leaf's audit path leads to: leaf SHA-256(0x00 || canonical JSON), node SHA-256(0x01 || left || right). */
function rootFromPath(leaf: unknown, path: ["L" | "R", string][]): string {
  let node = sha256(Buffer.of(0), canonicalJson(leaf));
  for (const [side, sibling] of path) {
    const s = Buffer.from(sibling, "hex");
    node = side === "L" ? sha256(Buffer.of(1), s, node) : sha256(Buffer.of(1), node, s);
  }
  return node.toString("hex");
}

/** The `accountId` an entry's data names: a value, or `undefined` when its data has no such member. */
function namedAccount(entry: Entry): unknown {
  const data = entry.data;
  return typeof data === "object" && data !== null && "accountId" in data ? (data as { accountId: unknown }).accountId : undefined;
}

/** Whether an entry names no account in its data, so that it is an account's through its stream only. */
function namesNoAccount(entry: Entry): boolean {
  const data = entry.data;
  return !(typeof data === "object" && data !== null && "accountId" in data);
}

/**
 * Which entries are the account's, as the export selects them: its `account-<id>` stream, data naming
 * it, and an entry naming no account in a stream where an earlier version (in the export) names it (a
 * batch's end events written before they carried `accountId`).
 */
function accountMembership(entries: { entry: Entry }[], accountId: string): (entry: Entry) => boolean {
  const namedFrom = new Map<string, number>();
  for (const { entry } of entries)
    if (namedAccount(entry) === accountId) namedFrom.set(entry.stream_id, Math.min(namedFrom.get(entry.stream_id) ?? entry.version, entry.version));
  return (entry) => {
    if (entry.stream_id === `account-${accountId}` || namedAccount(entry) === accountId) return true;
    const from = namedFrom.get(entry.stream_id);
    return from !== undefined && from < entry.version && namesNoAccount(entry);
  };
}

/**
 * Each checkpoint line: its signature (with the pinned key, or else the key it carries) over the
 * canonical JSON of {statement: "audit-checkpoint/2", checkpoint, after, upTo, eventCount, streamCount,
 * merkleRoot, accountsRoot} (or, for a line without accountsRoot, {statement: "audit-checkpoint/1", ...}
 * without it), each head's path to the signed Merkle root, and the export holding each signed head.
 * With an accounts root: the account's leaf ([accountId, heads]) leads to it, so its heads are every
 * stream of the account in the window; the export holds each of them, the line's head proofs are for
 * exactly those streams, and every entry that lies between two of the window's heads in the export (log
 * order) is one of those streams, at or before its head (or names no account and is of a stream the
 * window does not sign as the account's: a batch end event written before it carried accountId).
 */
function checkCheckpoints(
  entries: { line: number; entry: Entry }[],
  checkpoints: { line: number; checkpoint: CheckpointLine }[],
  pinned: KeyObject | null,
  problems: string[],
): { keyIds: string[]; withoutAccountsRoot: number } {
  const keyIds = new Set<string>();
  const at = new Map(entries.map(({ entry }, i) => [`${entry.stream_id}\u0000${entry.version}`, i]));
  let accountId: string | null = null;
  let withoutAccountsRoot = 0;
  for (const { line, checkpoint: c } of checkpoints) {
    const where = `line ${line}: checkpoint ${c.checkpoint}`;
    const common = {
      checkpoint: c.checkpoint,
      after: c.after,
      upTo: c.upTo,
      eventCount: c.eventCount,
      streamCount: c.streamCount,
      merkleRoot: c.merkleRoot,
    };
    const statement = canonicalJson(
      c.accountsRoot === undefined
        ? { statement: "audit-checkpoint/1", ...common }
        : { statement: "audit-checkpoint/2", ...common, accountsRoot: c.accountsRoot },
    );
    let key: KeyObject | null = pinned;
    try {
      key ??= createPublicKey({ key: Buffer.from(c.signature.publicKey, "base64"), format: "der", type: "spki" });
    } catch {
      key = null;
    }
    if (!key || keyIdOf(key) !== c.signature.keyId) {
      problems.push(
        `${where}: signed by key ${c.signature.keyId}, ${pinned ? `not the key you gave (${keyIdOf(pinned)})` : "whose public key does not match its id"}`,
      );
      continue;
    }
    if (!verify(null, Buffer.from(statement, "utf8"), key, Buffer.from(c.signature.value, "base64"))) {
      problems.push(`${where}: the signature does not verify (the checkpoint line was changed)`);
      continue;
    }
    keyIds.add(c.signature.keyId);
    for (const [streamId, version, hash, path] of c.heads) {
      const head = `${where}: ${streamId} v${version}`;
      if (rootFromPath([streamId, version, hash], path) !== c.merkleRoot) {
        problems.push(`${head}: the head is not one the checkpoint signed (its Merkle path does not lead to the signed root)`);
        continue;
      }
      if (hash.startsWith("legacy:")) continue;
      const i = at.get(`${streamId}\u0000${version}`);
      if (i === undefined) problems.push(`${head}: signed by the checkpoint, but the export does not hold this event (removed)`);
      else if (entries[i]!.entry.hash !== hash) problems.push(`${head}: the export's event is not the one the checkpoint signed (changed)`);
    }
    if (c.accountsRoot === undefined) {
      withoutAccountsRoot++;
      continue;
    }
    if (!c.account || typeof c.account.accountId !== "string" || !Array.isArray(c.account.heads) || !Array.isArray(c.account.path)) {
      problems.push(`${where}: signs an accounts root but carries no account proof: it cannot show its heads are all of the account's streams`);
      continue;
    }
    if (accountId !== null && c.account.accountId !== accountId) {
      problems.push(`${where}: names account ${c.account.accountId}, another checkpoint line names ${accountId}`);
      continue;
    }
    accountId = c.account.accountId;
    if (rootFromPath([accountId, c.account.heads], c.account.path) !== c.accountsRoot) {
      problems.push(
        `${where}: the account's list of streams is not the one the checkpoint signed (the accounts root does not match: a stream was removed from or added to it)`,
      );
      continue;
    }
    // The signed list, exactly: the export holds every listed head, and the line proves no other stream.
    const signed = new Map(c.account.heads.map(([streamId, version]) => [streamId, version]));
    const proven = new Set(c.heads.map(([streamId]) => streamId));
    for (const [streamId, version, hash] of c.account.heads) {
      if (proven.has(streamId)) continue; // its head proof was checked against the export above
      const head = `${where}: ${streamId} v${version}`;
      const i = hash.startsWith("legacy:") ? -1 : at.get(`${streamId}\u0000${version}`);
      if (i === undefined)
        problems.push(
          `${head}: signed as one of the account's streams in the window, but the export does not hold this event and the line has no head proof for it (removed)`,
        );
      else {
        problems.push(`${head}: signed as one of the account's streams in the window, but the line has no head proof for it (removed)`);
        if (i >= 0 && entries[i]!.entry.hash !== hash) problems.push(`${head}: the export's event is not the one the checkpoint signed (changed)`);
      }
    }
    for (const streamId of proven)
      if (!signed.has(streamId)) problems.push(`${where}: ${streamId}: has a head proof but is not one of the account's streams the checkpoint signed`);
    // Log order: whatever lies between two of this window's events is in the window too. An entry that
    // names no account (the account's through an earlier event of its stream) is signed as the account's
    // only where an event of its stream in the window names the account: elsewhere nothing here signs it.
    const indices = c.account.heads.flatMap(([streamId, version]) => at.get(`${streamId}\u0000${version}`) ?? []);
    if (indices.length < 2) continue;
    for (let i = Math.min(...indices) + 1; i < Math.max(...indices); i++) {
      const { line: entryLine, entry } = entries[i]!;
      const version = signed.get(entry.stream_id);
      if (version === undefined && namesNoAccount(entry) && entry.stream_id !== `account-${accountId}`) continue;
      if (version === undefined || entry.version > version)
        problems.push(
          `line ${entryLine}: ${entry.stream_id} v${entry.version}: lies inside the window of checkpoint ${c.checkpoint}, which does not sign it as one of the account's (added or reordered)`,
        );
    }
  }
  if (accountId !== null) {
    const belongs = accountMembership(entries, accountId);
    for (const { line, entry } of entries)
      if (!belongs(entry)) problems.push(`line ${line}: ${entry.stream_id} v${entry.version}: not an event of account ${accountId}, whom the checkpoints name`);
  }
  return { keyIds: [...keyIds], withoutAccountsRoot };
}

/**
 * Checks every entry's hash and each stream's chain (versions in a row, each linked to the one before),
 * and the signed checkpoint lines against the entries (with `publicKeyPem`, only that key's signatures).
 * A stream's chain is followed in version order, not in the file's: the file is in log order, and two
 * transactions that appended to one stream at once may commit (and so be logged) in the other order than
 * their versions (docs/audit.md). Where an event lies in the log is what the checkpoints' windows check.
 */
export function checkExport(
  entries: { line: number; entry: Entry }[],
  checkpoints: { line: number; checkpoint: CheckpointLine }[] = [],
  publicKeyPem?: string,
): ExportCheck {
  const streams = new Map<string, { line: number; entry: Entry }[]>();
  const problems: string[] = [];
  let unhashed = 0;
  for (const item of entries) {
    const { line, entry } = item;
    const events = streams.get(entry.stream_id);
    if (events) events.push(item);
    else streams.set(entry.stream_id, [item]);
    if (entry.hash === null) unhashed++;
    else if (hashOf(entry) !== entry.hash)
      problems.push(`line ${line}: ${entry.stream_id} v${entry.version}: the hash does not match the line's content (changed)`);
  }
  for (const events of streams.values()) problems.push(...chainProblems(events));
  const pinned = publicKeyPem ? createPublicKey(publicKeyPem) : null;
  const { keyIds, withoutAccountsRoot } = checkCheckpoints(entries, checkpoints, pinned, problems);
  return {
    lines: entries.length,
    streams: streams.size,
    unhashed,
    checkpoints: checkpoints.length,
    withoutAccountsRoot,
    keyIds,
    pinned: pinned !== null,
    problems,
  };
}

/** One stream's events (in file order): each version once, in a row, each hashed one linked to the one before. */
function chainProblems(events: { line: number; entry: Entry }[]): string[] {
  const problems: string[] = [];
  const inOrder = [...events].sort((a, b) => a.entry.version - b.entry.version || a.line - b.line);
  let head: { line: number; entry: Entry } | null = null;
  for (const item of inOrder) {
    const { line, entry } = item;
    const where = `line ${line}: ${entry.stream_id} v${entry.version}`;
    if (head === null) {
      if (entry.version === 1 && entry.hash !== null && entry.prev_hash !== null) problems.push(`${where}: version 1 with a previous hash`);
    } else if (entry.version === head.entry.version) {
      problems.push(`${where}: the same version as line ${head.line} (added)`);
      continue;
    } else if (entry.version !== head.entry.version + 1) {
      problems.push(`${where}: follows version ${head.entry.version} (missing events)`);
    } else if (entry.hash !== null && head.entry.hash !== null && entry.prev_hash !== head.entry.hash) {
      problems.push(`${where}: not chained to version ${head.entry.version} (changed, missing or reordered)`);
    }
    head = item;
  }
  return problems;
}

function main(args: string[]): number {
  const keyAt = args.indexOf("--public-key");
  const keyFile = keyAt >= 0 ? args[keyAt + 1] : undefined;
  const file = args.find((a, i) => !a.startsWith("--") && (keyAt < 0 || i !== keyAt + 1));
  if (!file || (keyAt >= 0 && !keyFile)) {
    process.stderr.write("usage: node tools/audit/verifyExport.ts <export.ndjson|export.csv> [--public-key audit-public-key.pem]\n");
    return 2;
  }
  let parsed: ReturnType<typeof parseExportFile>;
  let publicKeyPem: string | undefined;
  try {
    parsed = parseExportFile(readFileSync(file, "utf8"));
    publicKeyPem = keyFile ? readFileSync(keyFile, "utf8") : undefined;
    if (publicKeyPem) createPublicKey(publicKeyPem);
  } catch (error) {
    process.stderr.write(`cannot read ${file}${keyFile ? ` or ${keyFile}` : ""}: ${(error as Error).message}\n`);
    return 2;
  }
  if (parsed.entries.length === 0) {
    // Nothing verified is not a clean audit (an empty file, the wrong file, an export of nobody).
    process.stderr.write(`${file} holds no event: nothing was verified\n`);
    return 2;
  }
  const result = checkExport(parsed.entries, parsed.checkpoints, publicKeyPem);
  for (const p of result.problems) process.stdout.write(`FAIL ${p}\n`);
  if (!result.checkpoints) process.stdout.write("note: no signed checkpoint in the export: a stream removed whole cannot be told from one never written\n");
  else if (result.withoutAccountsRoot)
    process.stdout.write(
      `note: ${result.withoutAccountsRoot} checkpoint(s) signed as audit-checkpoint/1 (no accounts root): a stream removed whole together with its head from such a line cannot be told\n`,
    );
  process.stdout.write(
    `${result.lines} events in ${result.streams} streams checked` +
      (result.unhashed ? ` (${result.unhashed} written before the hash chain began: not verifiable offline)` : "") +
      (result.checkpoints
        ? `, ${result.checkpoints} signed checkpoint(s) by ${result.keyIds.join(", ") || "no valid key"}${result.pinned ? " (the key you gave)" : " (key not pinned: give --public-key)"}`
        : "") +
      `: ${result.problems.length ? `${result.problems.length} problem(s)` : "OK"}\n`,
  );
  return result.problems.length ? 1 : 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) process.exitCode = main(process.argv.slice(2));
