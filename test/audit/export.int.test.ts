import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { verifyAudit } from "../../projections/audit/verifyAudit.ts";
import { UsageRecorder } from "../../workers/completion/usageRecorder.ts";
import { costMicroChf } from "../../src/ledger/pricing/costMicroChf.ts";
import { publishPriceTable } from "../../src/ledger/pricing/priceTable.ts";
import { checkExport, parseExport } from "../../tools/audit/verifyExport.ts";
import { createKey, expectError, KEYS_PATH } from "../keys/keySteps.ts";
import { eventuallyTrue } from "../support/eventually.ts";
import { createTestAccount, type TestAccount } from "../support/testAccounts.ts";
import { startTestApp, type TestApp } from "../support/testApp.ts";
import { usageEvent } from "../usage/usageFixtures.ts";
import { checkpointEverything, PRICES_V1 } from "./auditFixtures.ts";
import { checkpointSignerFromPem, generateCheckpointKeyPair } from "../../src/ledger/audit/checkpointSignature.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
const AUDIT_PATH = "/api/v1/accounts/user/audit-log";

let app: TestApp;
let owner: TestAccount;
let other: TestAccount;
let dir: string;

type CliResult = { code: number; stdout: string; stderr: string };
function node(args: string[]): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      args,
      { cwd: ROOT, env: { ...process.env, DATABASE_URL: app.db.url, ADMIN_TOKEN: "" }, maxBuffer: 64 << 20 },
      (error, stdout, stderr) => {
        resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr });
      },
    );
  });
}

async function charge(account: TestAccount, keyId: string, version: string, promptTokens: number): Promise<void> {
  const cost = costMicroChf({ promptTokens, completionTokens: 7 }, PRICES_V1["tiny-test"]!);
  const event = usageEvent({ accountId: account.accountId, keyId, promptTokens, completionTokens: 7, costMicroChf: cost, priceTableVersion: version });
  expect(await new UsageRecorder(app.db.pool).record(event.data, {})).toBe("recorded");
}

beforeAll(async () => {
  app = await startTestApp();
  dir = await mkdtemp(path.join(tmpdir(), "audit-export-"));
  const version = await publishPriceTable(app.db.pool, "export-1", PRICES_V1, new Date(Date.now() - 1000));
  owner = await createTestAccount(app.db.pool);
  other = await createTestAccount(app.db.pool);
  // A name CSV must quote: comma, quotes, non-ASCII.
  const first = await createKey(app, owner.sessionToken, 'prod, "main" käse');
  const second = await createKey(app, owner.sessionToken, "second");
  const revoked = await app.request("POST", `${KEYS_PATH}${second.id}/revoke`, { token: owner.sessionToken });
  expect(revoked.status, revoked.text).toBe(200);
  const otherKey = await createKey(app, other.sessionToken, "not yours");
  for (let i = 0; i < 4; i++) await charge(owner, first.id, version, 100 + i);
  await charge(other, otherKey.id, version, 50);
  // The export shows transactions that have ended before every one still open on the server: wait for
  // other tests' transactions (on a shared server) to end.
  const settled = await eventuallyTrue(async () => {
    const res = await app.request("GET", `${AUDIT_PATH}?limit=1000`, { token: owner.sessionToken });
    return res.body.data.filter((e: { type: string }) => e.type === "UsageRecorded").length === 4;
  }, 60_000);
  expect(settled).toBe(true);
}, 120_000);
afterAll(async () => {
  await app.close();
  await rm(dir, { recursive: true, force: true });
});

/** Every page of the JSON export, following next_cursor. */
async function allJsonPages(limit: number): Promise<Record<string, any>[]> {
  const entries: Record<string, any>[] = [];
  let cursor: string | null = null;
  for (let page = 0; page < 100; page++) {
    const res = await app.request("GET", `${AUDIT_PATH}?limit=${limit}${cursor ? `&cursor=${cursor}` : ""}`, { token: owner.sessionToken });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.length).toBeLessThanOrEqual(limit);
    entries.push(...res.body.data);
    expect(res.body.has_more).toBe(res.body.next_cursor !== null);
    if (!res.body.next_cursor) return entries;
    cursor = res.body.next_cursor;
  }
  throw new Error("no last page");
}

describe("audit export", () => {
  it("pages the caller's own history (account, key lifecycle, usage) with hashes, and nothing of another account", async () => {
    const entries = await allJsonPages(3);
    const types = entries.map((e) => e.type);
    expect(types.filter((t) => t === "UsageRecorded")).toHaveLength(4);
    expect(types).toEqual(expect.arrayContaining(["AccountRegistered", "KeyCreated", "KeyRevoked"]));
    expect(entries.every((e) => e.stream_id === `account-${owner.accountId}` || e.data.accountId === owner.accountId)).toBe(true);
    expect(JSON.stringify(entries)).not.toContain(other.accountId);
    expect(entries.every((e) => /^[0-9a-f]{64}$/.test(e.hash))).toBe(true);
    expect(new Set(entries.map((e) => e.event_id)).size).toBe(entries.length);
    expect(await allJsonPages(1000)).toEqual(entries);
    expect(checkExport(entries.map((entry, i) => ({ line: i + 1, entry: entry as never }))).problems).toEqual([]);
  });

  it("serves CSV for format=csv and for Accept: text/csv, with the next page's cursor in a header", async () => {
    const byFormat = await app.request("GET", `${AUDIT_PATH}?format=csv&limit=2`, { token: owner.sessionToken });
    expect(byFormat.status).toBe(200);
    expect(byFormat.headers.get("content-type")).toMatch(/^text\/csv/);
    expect(byFormat.text.split("\r\n")[0]).toBe("stream_id,version,event_id,type,schema_version,recorded_at,data,metadata,prev_hash,hash");
    expect(byFormat.headers.get("x-next-cursor")).toBeTruthy();
    let csv = "";
    let cursor: string | null = null;
    do {
      const res = await app.request("GET", `${AUDIT_PATH}?limit=4${cursor ? `&cursor=${cursor}` : ""}`, {
        token: owner.sessionToken,
        headers: { accept: "text/csv" },
      });
      expect(res.headers.get("content-type")).toMatch(/^text\/csv/);
      csv += cursor ? res.text.slice(res.text.indexOf("\r\n") + 2) : res.text;
      cursor = res.headers.get("x-next-cursor");
    } while (cursor);
    // The key name is JSON text inside a quoted CSV field: its quotes are escaped for JSON, then doubled for CSV.
    expect(csv).toContain('prod, \\""main\\"" käse');
    const parsed = parseExport(csv);
    expect(parsed.map((p) => p.entry)).toEqual((await allJsonPages(1000)).map((e) => ({ ...e })));
    expect(checkExport(parsed).problems).toEqual([]);
  });

  it("answers 401 without a session and 400 for a bad cursor, limit or parameter", async () => {
    expectError(await app.request("GET", AUDIT_PATH), 401, "authentication_error");
    expectError(await app.request("GET", `${AUDIT_PATH}?cursor=nonsense`, { token: owner.sessionToken }), 400, "invalid_request_error", { param: "cursor" });
    expectError(await app.request("GET", `${AUDIT_PATH}?limit=0`, { token: owner.sessionToken }), 400, "invalid_request_error", { param: "limit" });
    const twice = await app.request("GET", `${AUDIT_PATH}?limit=1&limit=2`, { token: owner.sessionToken });
    expectError(twice, 400, "invalid_request_error", { param: "limit" });
    expect(twice.body.error.message).toBe("The query parameter 'limit' was given more than once; it takes one value.");
    expectError(await app.request("GET", `${AUDIT_PATH}?format=xml`, { token: owner.sessionToken }), 400, "invalid_request_error", { param: "format" });
    expectError(await app.request("GET", `${AUDIT_PATH}?account=${other.accountId}`, { token: owner.sessionToken }), 400, "invalid_request_error");
  });

  it("operator export (ndjson) verifies offline; one tampered line is named and fails the check", async () => {
    const exported = await node(["src/api/admin/cli.ts", "export", "--account", owner.accountId, "--format", "ndjson"]);
    expect(exported.code, exported.stderr).toBe(0);
    const lines = exported.stdout.trim().split("\n");
    expect(lines.map((l) => JSON.parse(l))).toEqual(await allJsonPages(1000));
    const file = path.join(dir, "export.ndjson");
    await writeFile(file, exported.stdout);
    const ok = await node(["tools/audit/verifyExport.ts", file]);
    expect(ok.code, ok.stdout + ok.stderr).toBe(0);
    expect(ok.stdout).toMatch(/checked: OK/);

    const target = lines.findIndex((l) => JSON.parse(l).type === "UsageRecorded");
    const tampered = JSON.parse(lines[target]!);
    tampered.data.costMicroChf += 1;
    lines[target] = JSON.stringify(tampered);
    await writeFile(file, `${lines.join("\n")}\n`);
    const bad = await node(["tools/audit/verifyExport.ts", file]);
    expect(bad.code).toBe(1);
    expect(bad.stdout).toContain(`FAIL line ${target + 1}: ${tampered.stream_id} v1: the hash does not match`);
  });

  it("an empty export verifies nothing: exit 2, not OK", async () => {
    const file = path.join(dir, "empty.ndjson");
    await writeFile(file, "");
    const result = await node(["tools/audit/verifyExport.ts", file]);
    expect(result.code).toBe(2);
    expect(result.stdout).not.toContain("OK");
    expect(result.stderr).toContain("holds no event: nothing was verified");
  });

  it("operator export (csv) verifies offline; a removed line is named", async () => {
    const exported = await node(["src/api/admin/cli.ts", "export", "--account-id", owner.accountId, "--format", "csv"]);
    expect(exported.code, exported.stderr).toBe(0);
    const file = path.join(dir, "export.csv");
    await writeFile(file, exported.stdout);
    expect((await node(["tools/audit/verifyExport.ts", file])).code).toBe(0);
    const records = (await readFile(file, "utf8")).split("\r\n");
    const keyRevokedAt = records.findIndex((r) => r.includes(",KeyCreated,") && r.includes("second"));
    records.splice(keyRevokedAt, 1);
    await writeFile(file, records.join("\r\n"));
    const bad = await node(["tools/audit/verifyExport.ts", file]);
    expect(bad.code).toBe(1);
    expect(bad.stdout).toMatch(new RegExp(`FAIL line ${keyRevokedAt + 1}: account-${owner.accountId} v\\d+: follows version \\d+`));
  });

  it("the server-side verify of the account agrees", async () => {
    const report = await verifyAudit(app.db.pool, { accountId: owner.accountId, readModels: false });
    expect(report.findings).toEqual([]);
    expect(report.charges.charges).toBe(4);
  });

  it("the last JSON page carries the signed checkpoints of the account's streams; a charge removed from the export then fails the offline check", async () => {
    const pair = generateCheckpointKeyPair();
    await checkpointEverything(app.db.pool, checkpointSignerFromPem(pair.privatePem));
    let res = await app.request("GET", `${AUDIT_PATH}?limit=1000`, { token: owner.sessionToken });
    expect(res.status, res.text).toBe(200);
    expect(res.body.has_more).toBe(false);
    expect(res.body.checkpoints.length).toBeGreaterThan(0);
    expect(JSON.stringify(res.body.checkpoints)).not.toContain(other.accountId);
    const entries = res.body.data.map((entry: never, i: number) => ({ line: i + 1, entry }));
    const checkpoints = res.body.checkpoints.map((checkpoint: never, i: number) => ({ line: entries.length + i + 1, checkpoint }));
    expect(checkExport(entries, checkpoints, pair.publicPem).problems).toEqual([]);
    const charge = entries.findIndex((e: { entry: { type: string } }) => e.entry.type === "UsageRecorded");
    const without = entries.filter((_: unknown, i: number) => i !== charge);
    expect(checkExport(without, checkpoints, pair.publicPem).problems).toContainEqual(expect.stringContaining("(removed)"));
    // A page with more to come carries none.
    res = await app.request("GET", `${AUDIT_PATH}?limit=1`, { token: owner.sessionToken });
    expect(res.body.has_more).toBe(true);
    expect(res.body.checkpoints).toBeUndefined();
  });

  it("a stream's events logged out of version order (two transactions appending at once commit the other way round) verify offline; a duplicate or a gap does not", async () => {
    const res = await app.request("GET", `${AUDIT_PATH}?limit=1000`, { token: owner.sessionToken });
    expect(res.status, res.text).toBe(200);
    type Line = { stream_id: string; version: number };
    const data = res.body.data as Line[];
    const stream = `account-${owner.accountId}`;
    const first = data.findIndex((e) => e.stream_id === stream && e.version === 2);
    const second = data.findIndex((e) => e.stream_id === stream && e.version === 3);
    expect(first).toBeGreaterThanOrEqual(0);
    expect(second).toBeGreaterThan(first);
    // v3 in the log before v2, as a probe's honest export of concurrent key renames had them.
    const swapped = [...data];
    [swapped[first], swapped[second]] = [swapped[second]!, swapped[first]!];
    const lines = (items: Line[]) => items.map((entry, i) => ({ line: i + 1, entry: entry as never }));
    expect(checkExport(lines(swapped)).problems).toEqual([]);
    const duplicated = [...data, data[first]!];
    expect(checkExport(lines(duplicated)).problems).toEqual([`line ${data.length + 1}: ${stream} v2: the same version as line ${first + 1} (added)`]);
    const gap = data.filter((_, i) => i !== first);
    expect(checkExport(lines(gap)).problems).toEqual([`line ${second}: ${stream} v3: follows version 1 (missing events)`]);
  });

  it("one account's export shows no other account's events even with a forged cursor", async () => {
    const res = await app.request("GET", `${AUDIT_PATH}?cursor=${Buffer.from("0.0").toString("base64url")}`, { token: other.sessionToken });
    expect(res.status).toBe(200);
    expect(JSON.stringify(res.body)).not.toContain(owner.accountId);
    expect(res.body.data.length).toBeGreaterThan(0);
  });
});
