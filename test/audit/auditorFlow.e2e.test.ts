import { startTestProjector } from "../support/testProjector.ts";
import { execFile } from "node:child_process";
import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ProjectionRunner } from "../../projections/projectionRunner.ts";
import { writeAuditCheckpoints } from "../../src/ledger/audit/auditCheckpoint.ts";
import { readPriceVersions } from "../../src/ledger/pricing/priceTable.ts";
import { KEYS_PATH } from "../keys/keySteps.ts";
import { eventuallyTrue } from "../support/eventually.ts";
import { operatorEdit } from "../support/operatorEdit.ts";
import OpenAI from "openai";
import { startSecondApi, startTestPlatform, TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";

const ROOT = new URL("../../", import.meta.url).pathname;

type CliResult = { code: number; stdout: string; stderr: string };
function run(file: string, args: string[], databaseUrl: string): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(file, args, { cwd: ROOT, env: { ...process.env, DATABASE_URL: databaseUrl, ADMIN_TOKEN: "" } }, (error, stdout, stderr) => {
      resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

/**
 * The auditor's whole path on the real platform: completions charged by a real worker, a price change
 * (the worker restarts with new registry prices and publishes a new price table version), key
 * lifecycle through the HTTP API; then the account holder exports the history, it verifies offline,
 * and `npm run audit -- verify` agrees with the live read models; one edited row makes it fail.
 */
describe("auditor flow", () => {
  let platform: TestPlatform;
  let runner: ProjectionRunner;
  beforeAll(async () => {
    platform = await startTestPlatform();
    runner = startTestProjector(platform);
  });
  afterAll(async () => {
    await runner?.stop();
    await platform?.close();
  });

  it("exports, verifies offline, and the server verify agrees; a tampered row fails it", async () => {
    const { account, key, keyId } = await platform.createKey();
    const client = platform.openai(key);
    await client.chat.completions.create({ model: TINY_CHAT, messages: [{ role: "user", content: "Hello" }], max_tokens: 8 });

    // New prices under the same label, deployed: the API process that starts with them publishes a new
    // version, holds at it and has its requests charged at it (the restarted worker publishes nothing more).
    const registryFile = path.join(platform.dir, "registry.json");
    const registry = JSON.parse(await readFile(registryFile, "utf8"));
    for (const model of registry.models) model.pricing = { input_per_million_chf: 2, output_per_million_chf: 5 };
    await writeFile(registryFile, JSON.stringify(registry));
    const deployed = await startSecondApi(platform);
    await platform.stopWorker();
    await platform.startWorker();
    try {
      const again = new OpenAI({ baseURL: `${deployed.baseUrl}/v1`, apiKey: key, maxRetries: 0 });
      await again.chat.completions.create({ model: TINY_CHAT, messages: [{ role: "user", content: "Again" }], max_tokens: 8 });
    } finally {
      await deployed.close();
    }
    const versions = await readPriceVersions(platform.deps.pool);
    expect(versions.map((v) => v.version)).toEqual(["test-1", expect.stringMatching(/^test-1\+[0-9a-f]{12}$/)]);
    const charged = await platform.deps.pool.query<{ v: string }>(
      "SELECT data->>'priceTableVersion' AS v FROM es_events WHERE event_type = 'UsageRecorded' AND data->>'accountId' = $1 ORDER BY global_position",
      [account.accountId],
    );
    expect(charged.rows.map((r) => r.v)).toEqual(versions.map((v) => v.version));

    const revoked = await platform.request("POST", `${KEYS_PATH}${keyId}/revoke`, { token: account.sessionToken });
    expect(revoked.status, revoked.text).toBe(200);
    await writeAuditCheckpoints(platform.deps.pool);

    // The account holder's export, verified offline with the documented script. It shows transactions
    // that ended before every one still open on the (shared) server: wait for it to hold everything.
    const exportNow = () => platform.request("GET", "/api/v1/accounts/user/audit-log?limit=1000", { token: account.sessionToken });
    expect(await eventuallyTrue(async () => (await exportNow()).body.data.some((e: { type: string }) => e.type === "KeyRevoked"), 60_000)).toBe(true);
    const exported = await exportNow();
    expect(exported.status, exported.text).toBe(200);
    expect(exported.body.data.map((e: { type: string }) => e.type)).toEqual(expect.arrayContaining(["KeyCreated", "UsageRecorded", "KeyRevoked"]));
    const file = path.join(platform.dir, "audit.ndjson");
    await writeFile(file, exported.body.data.map((e: unknown) => JSON.stringify(e)).join("\n"));
    const offline = await run(process.execPath, ["tools/audit/verifyExport.ts", file], platform.db.url);
    expect(offline.code, offline.stdout + offline.stderr).toBe(0);

    // The server-side verify, once the projector has caught up with the log (and the settles folded).
    const caughtUp = await eventuallyTrue(async () => {
      const r = await platform.deps.pool.query<{ n: string }>("SELECT count(*) AS n FROM rm_key_usage_daily WHERE key_id = $1", [keyId]);
      return Number(r.rows[0]?.n ?? 0) > 0;
    }, 20_000);
    expect(caughtUp).toBe(true);
    const verified = await run("npm", ["run", "--silent", "audit", "--", "verify"], platform.db.url);
    expect(verified.code, verified.stdout + verified.stderr).toBe(0);
    expect(verified.stdout).toMatch(/charges: +\d+ recomputed from 2 price table version\(s\)/);
    expect(verified.stdout).toContain("OK: the log, its checkpoints, the charges and the read models agree");

    const usageStream = `completion-${exported.body.data.find((e: { type: string }) => e.type === "UsageRecorded").data.completionId}`;
    await operatorEdit(platform.deps.pool, (c) =>
      c.query("UPDATE es_events SET data = jsonb_set(data, '{completionTokens}', '0') WHERE stream_id = $1", [usageStream]),
    );
    const failed = await run("npm", ["run", "--silent", "audit", "--", "verify", "--account", account.accountId, "--skip-read-models"], platform.db.url);
    expect(failed.code).toBe(1);
    expect(failed.stdout).toContain(`FAIL chain ${usageStream} v1: stored hash does not match`);
    expect(failed.stdout).toContain(`FAIL charge ${usageStream} v1: recorded cost`);
  }, 180_000);
});
