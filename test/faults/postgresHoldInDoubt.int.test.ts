import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../support/eventually.ts";
import { ADMIN_DATABASE_URL } from "../support/templateDatabase.ts";
import { startTcpProxy, type TcpProxy } from "../support/tcpProxy.ts";
import { startTestPlatform, type TestPlatform } from "../support/testPlatform.ts";
import { type CountingUpstream, startCountingUpstream, countingModel } from "./countingUpstream.ts";
import { timed } from "./faultSteps.ts";

/**
 * A budget hold whose statement committed while its connection was lost: the API reaches PostgreSQL
 * through a proxy that stops passing the server's answers on ("deaf"), so the hold statement commits
 * but the API never hears of it and answers 503. The request ran no job, so once PostgreSQL answers
 * again the hold is released, without waiting for the sweeper (BUDGET_HOLD_MAX_AGE_S, 30 minutes).
 */
const MODEL = "counting-model";
let proxy: TcpProxy;
let upstream: CountingUpstream;
let platform: TestPlatform;

beforeAll(async () => {
  const admin = new URL(ADMIN_DATABASE_URL);
  proxy = await startTcpProxy({ host: admin.hostname, port: Number(admin.port || 5432) });
  upstream = await startCountingUpstream({ totalTokens: 4, tokenDelayMs: 5, promptTokens: 20 });
  const model = countingModel(upstream, { id: MODEL, maxConcurrency: 4 });
  platform = await startTestPlatform({ models: () => [model], databaseUrl: (url) => proxy.rewrite(url) });
}, 120_000);
afterAll(async () => {
  await proxy?.setMode("pass");
  await platform?.close();
  await upstream?.close();
  await proxy?.close();
});

const openHolds = async (accountId: string) =>
  (await platform.db.pool.query<{ hold_id: string }>("SELECT hold_id FROM budget_holds WHERE account_id = $1", [accountId])).rows.map((r) => r.hold_id);

describe("a budget hold placed while its connection was lost", () => {
  it("is released once PostgreSQL answers again, not left to the sweeper", async () => {
    const { key, account } = await platform.createKey();
    const other = await platform.createKey();
    const chat = (token = key) =>
      timed(platform.request("POST", "/v1/chat/completions", { token, body: { model: MODEL, messages: [{ role: "user", content: "Count" }], max_tokens: 8 } }));
    // Another account's request opens the hold pool's connection; this key is cached. The account has
    // placed no hold yet, so its next admission is the careful one (the hold first, then the job): a
    // failed hold leaves no job behind that could settle it.
    expect((await chat(other.key)).status).toBe(200);
    expect((await platform.request("GET", "/v1/models", { token: key })).status).toBe(200);

    await proxy.setMode("deaf");
    const failed = await chat();
    expect(failed.status, failed.text).toBe(503);
    expect(failed.ms).toBeLessThan(5000);
    expect(failed.body.error.code).toBe("database_unavailable");
    // The hold statement did commit.
    const placed = await openHolds(account.accountId);
    expect(placed).toHaveLength(1);

    await proxy.setMode("pass");
    await eventually(async () => ((await openHolds(account.accountId)).length === 0 ? true : undefined), 20_000);
    const budget = await platform.db.pool.query<{ held: string }>("SELECT held_micro_chf::bigint AS held FROM rm_budget WHERE account_id = $1", [
      account.accountId,
    ]);
    expect(Number(budget.rows[0]!.held)).toBe(0);
    expect((await chat()).status).toBe(200);
  }, 60_000);
});
