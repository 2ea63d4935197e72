import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { executeAccountCommand } from "../../src/ledger/accounts/executeAccountCommand.ts";
import type { Engine } from "../../workers/engines/engine.ts";
import { eventuallyTrue } from "../support/eventually.ts";
import { startTestPlatform, TINY_EMBED, type TestPlatform } from "../support/testPlatform.ts";

/** Embedding jobs wait at this gate, so every admitted request keeps its hold until all 200 were decided. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

describe("budget race over HTTP", () => {
  const embedGate = gate();
  let platform: TestPlatform;
  beforeAll(async () => {
    const gated = (_model: unknown, engine: Engine): Engine => ({
      capabilities: () => engine.capabilities(),
      chat: (request, onDelta, signal) => engine.chat(request, onDelta, signal),
      embed: async (texts, signal) => {
        await embedGate.opened;
        return engine.embed(texts, signal);
      },
      countChatTokens: (messages, tools) => engine.countChatTokens(messages, tools),
      countTokens: (text) => engine.countTokens(text),
      maxConcurrency: () => engine.maxConcurrency(),
      close: () => engine.close(),
    });
    platform = await startTestPlatform({ wrapEngine: gated, env: { JOB_START_TIMEOUT_MS: "60000" } });
  });
  afterAll(async () => {
    embedGate.open();
    await platform?.close();
  });

  it("admits at most CHF 0.01 / CHF 0.0001 = 100 of 200 concurrent requests; the rest get 429 monthly_budget_exceeded; spend stays within the budget", async () => {
    const { key, account } = await platform.createKey();
    await executeAccountCommand(platform.deps.accounts, account.accountId, {
      type: "SetSubscription",
      status: "active",
      monthlyBudgetMicroChf: 10_000,
      now: new Date(),
    });
    // tiny-embed costs CHF 0.25 / M input tokens; the hold bounds an input by its UTF-8 bytes + 40 template
    // tokens: 360 bytes -> 400 tokens -> 100 micro-CHF = CHF 0.0001, the most such a request can cost.
    const input = "x".repeat(360);
    const statuses: number[] = [];
    const bodies: any[] = [];
    const requests = Array.from({ length: 200 }, async () => {
      const res = await platform.request("POST", "/v1/embeddings", { token: key, body: { model: TINY_EMBED, input } });
      statuses.push(res.status);
      bodies.push(res.body);
    });
    const decided = await eventuallyTrue(async () => {
      const holds = await platform.deps.pool.query("SELECT count(*)::int AS n FROM budget_holds WHERE account_id = $1", [account.accountId]);
      return statuses.filter((s) => s === 429).length + holds.rows[0].n === 200;
    }, 60_000);
    expect(decided).toBe(true);
    embedGate.open();
    await Promise.all(requests);

    const admitted = statuses.filter((s) => s === 200).length;
    const refused = bodies.filter((b) => b?.error?.code === "monthly_budget_exceeded").length;
    expect(admitted).toBeLessThanOrEqual(100);
    expect(admitted).toBe(100);
    expect(refused).toBe(100);
    expect(statuses.filter((s) => s !== 200 && s !== 429)).toEqual([]);

    const noHoldsLeft = await eventuallyTrue(async () => {
      const r = await platform.deps.pool.query("SELECT count(*)::int AS n FROM budget_holds WHERE account_id = $1", [account.accountId]);
      return r.rows[0].n === 0;
    });
    expect(noHoldsLeft).toBe(true);
    const recorded = await platform.deps.pool.query<{ n: number; cost: string }>(
      "SELECT count(*)::int AS n, coalesce(sum((data->>'costMicroChf')::bigint), 0) AS cost FROM es_events WHERE event_type = 'UsageRecorded' AND data->>'accountId' = $1",
      [account.accountId],
    );
    expect(recorded.rows[0]!.n).toBe(100);
    const budget = await platform.deps.pool.query("SELECT spent_micro_chf::int AS spent, held_micro_chf::int AS held FROM rm_budget WHERE account_id = $1", [
      account.accountId,
    ]);
    expect(budget.rows[0]).toEqual({ spent: Number(recorded.rows[0]!.cost), held: 0 });
    expect(budget.rows[0].spent).toBeLessThanOrEqual(10_000);
  });
});
