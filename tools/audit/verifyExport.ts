/**
 * Offline check of an audit export (NDJSON or CSV, from `GET /api/v1/accounts/user/audit-log` or
 * `npm run admin -- export`): recomputes every event's hash and follows each stream's chain.
 *
 *   node tools/audit/verifyExport.ts export.ndjson      (or export.csv)
 *
 * Self-contained on purpose (Node's own modules only), so an auditor can read all of it and run it on
 * any machine with Node 22.18 or later (which runs TypeScript directly). The hash is SHA-256 over the
 * RFC 8785 canonical JSON of { prevHash, streamId, streamVersion, eventId, type, schemaVersion, data,
 * metadata, recordedAt } (docs/audit.md). Exit status 0 when every line verifies, 1 naming each line that does not, 2 when
 * the file cannot be read.
 */
import { createHash } from "node:crypto";
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

export type ExportCheck = { lines: number; streams: number; unhashed: number; problems: string[] };

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
    .map(({ l, line }) => ({ line, entry: JSON.parse(l) as Entry }));
}

/** Checks every entry's hash and each stream's chain (versions in a row, each linked to the one before). */
export function checkExport(entries: { line: number; entry: Entry }[]): ExportCheck {
  const heads = new Map<string, { version: number; hash: string | null }>();
  const problems: string[] = [];
  let unhashed = 0;
  for (const { line, entry } of entries) {
    const where = `line ${line}: ${entry.stream_id} v${entry.version}`;
    const head = heads.get(entry.stream_id);
    heads.set(entry.stream_id, { version: entry.version, hash: entry.hash });
    if (entry.hash === null) {
      unhashed++;
      continue;
    }
    if (hashOf(entry) !== entry.hash) problems.push(`${where}: the hash does not match the line's content (changed)`);
    if (head) {
      if (entry.version !== head.version + 1) problems.push(`${where}: follows version ${head.version} (missing or reordered events)`);
      else if (head.hash !== null && entry.prev_hash !== head.hash)
        problems.push(`${where}: not chained to version ${head.version} (changed, missing or reordered)`);
    } else if (entry.version === 1 && entry.prev_hash !== null) {
      problems.push(`${where}: version 1 with a previous hash`);
    }
  }
  return { lines: entries.length, streams: heads.size, unhashed, problems };
}

function main(file: string | undefined): number {
  if (!file) {
    process.stderr.write("usage: node tools/audit/verifyExport.ts <export.ndjson|export.csv>\n");
    return 2;
  }
  let entries: { line: number; entry: Entry }[];
  try {
    entries = parseExport(readFileSync(file, "utf8"));
  } catch (error) {
    process.stderr.write(`cannot read ${file}: ${(error as Error).message}\n`);
    return 2;
  }
  const result = checkExport(entries);
  for (const p of result.problems) process.stdout.write(`FAIL ${p}\n`);
  process.stdout.write(
    `${result.lines} events in ${result.streams} streams checked` +
      (result.unhashed ? ` (${result.unhashed} written before the hash chain began: not verifiable offline)` : "") +
      `: ${result.problems.length ? `${result.problems.length} problem(s)` : "OK"}\n`,
  );
  return result.problems.length ? 1 : 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) process.exitCode = main(process.argv[2]);
