import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import OpenAI from "openai";
import { executeAccountCommand } from "../../src/ledger/accounts/executeAccountCommand.ts";
import { billingPeriod } from "../../src/ledger/budget/billingPeriod.ts";
import type { Engine } from "../../workers/engines/engine.ts";
import { eventuallyTrue } from "../support/eventually.ts";
import { startTestPlatform, TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";

/** The real engine, made to wait `delayMs` before generating (or until its job is aborted). */
function slowEngine(engine: Engine, delayMs: number, calls: { aborted: boolean }[]): Engine {
  return {
    capabilities: () => engine.capabilities(),
    async chat(request, onDelta, signal) {
      const call = { aborted: false };
      calls.push(call);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, delayMs);
        signal?.addEventListener("abort", () => {
          call.aborted = true;
          clearTimeout(timer);
          resolve();
        });
      });
      return engine.chat(request, onDelta, signal);
    },
    embed: (texts, signal) => engine.embed(texts, signal),
    countChatTokens: (messages, tools) => engine.countChatTokens(messages, tools),
    countTokens: (text) => engine.countTokens(text),
    maxConcurrency: () => engine.maxConcurrency(),
    close: () => engine.close(),
  };
}

async function usageEventsOf(platform: TestPlatform, accountId: string): Promise<{ completionId: string; cost: number }[]> {
  const r = await platform.deps.pool.query<{ completion_id: string; cost: string }>(
    "SELECT data->>'completionId' AS completion_id, data->>'costMicroChf' AS cost FROM es_events WHERE event_type = 'UsageRecorded' AND data->>'accountId' = $1",
    [accountId],
  );
  return r.rows.map((row) => ({ completionId: row.completion_id, cost: Number(row.cost) }));
}

describe("speculative admission through the HTTP API (real queue, worker and engine)", () => {
  let platform: TestPlatform;
  const calls: { aborted: boolean }[] = [];
  beforeAll(async () => {
    platform = await startTestPlatform({ wrapEngine: (_model, engine) => slowEngine(engine, 800, calls) });
  });
  afterAll(async () => {
    await platform?.close();
  });

  it("admits an account's next request speculatively once its budget is known to be ample, and charges it once", async () => {
    const { key, account } = await platform.createKey();
    const client = platform.openai(key);
    const start = vi.spyOn(platform.inference.gateway, "start");
    try {
      await client.chat.completions.create({ model: TINY_CHAT, messages: [{ role: "user", content: "Hi" }], max_tokens: 3 });
      expect(platform.inference.speculation.maySpeculate(account.accountId, 1, new Date())).toBe(true);
      const stream = await client.chat.completions.create({ model: TINY_CHAT, messages: [{ role: "user", content: "Hi" }], max_tokens: 3, stream: true });
      let text = "";
      for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
      expect(text.length).toBeGreaterThan(0);
      expect(start.mock.calls.map(([request]) => request.speculative === true)).toEqual([false, true]);
    } finally {
      start.mockRestore();
    }
    const settled = await eventuallyTrue(async () => {
      const events = await usageEventsOf(platform, account.accountId);
      const holds = await platform.deps.pool.query("SELECT count(*)::int AS n FROM budget_holds WHERE account_id = $1", [account.accountId]);
      return events.length === 2 && holds.rows[0].n === 0;
    });
    expect(settled).toBe(true);
    const usage = await usageEventsOf(platform, account.accountId);
    const budget = await platform.deps.pool.query(
      "SELECT spent_micro_chf::bigint AS spent, held_micro_chf::bigint AS held FROM rm_budget WHERE account_id = $1",
      [account.accountId],
    );
    expect(Number(budget.rows[0].spent)).toBe(usage.reduce((sum, e) => sum + e.cost, 0));
    expect(Number(budget.rows[0].held)).toBe(0);
  });

  it("answers 429 when the speculative hold is refused, stops the job and charges nothing", async () => {
    const { key, account } = await platform.createKey();
    await executeAccountCommand(platform.deps.accounts, account.accountId, {
      type: "SetSubscription",
      status: "active",
      monthlyBudgetMicroChf: 1,
      now: new Date(),
    });
    // What this API process last saw of the account says its budget is ample (another process spent it since).
    const now = new Date();
    platform.inference.speculation.observe(account.accountId, { ok: true, holdId: "seen-before", period: billingPeriod(now), remainingMicroChf: 1e12 }, now);
    const before = calls.length;
    const error = await platform
      .openai(key)
      .chat.completions.create({ model: TINY_CHAT, messages: [{ role: "user", content: "Hi" }], max_tokens: 50 })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.RateLimitError);
    expect((error as InstanceType<typeof OpenAI.RateLimitError>).code).toBe("monthly_budget_exceeded");
    // The job was taken off the queue, or the worker running it was told to abort (long before its 800 ms wait).
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(calls.slice(before).every((call) => call.aborted)).toBe(true);
    expect(await usageEventsOf(platform, account.accountId)).toEqual([]);
    const refusals = await platform.deps.pool.query("SELECT count(*)::int AS n FROM refused_holds");
    expect(refusals.rows[0].n).toBe(1);
    const holds = await platform.deps.pool.query("SELECT count(*)::int AS n FROM budget_holds WHERE account_id = $1", [account.accountId]);
    expect(holds.rows[0].n).toBe(0);
    // The refusal made the API careful for this account: the next request holds first.
    expect(platform.inference.speculation.maySpeculate(account.accountId, 1, new Date())).toBe(false);
  });
});
