import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import pg from "pg";
import type { Engine } from "../../workers/engines/engine.ts";
import { eventually } from "../support/eventually.ts";
import { startTestPlatform, TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";

/** The real engine, noting when each of its calls ended and whether it was aborted. */
function watchedEngine(engine: Engine, calls: { ended: boolean; aborted: boolean }[]): Engine {
  return {
    capabilities: () => engine.capabilities(),
    async chat(request, onDelta, signal) {
      const call = { ended: false, aborted: false };
      calls.push(call);
      try {
        return await engine.chat(request, onDelta, signal);
      } finally {
        call.ended = true;
        call.aborted = signal?.aborted ?? false;
      }
    },
    embed: (texts, signal) => engine.embed(texts, signal),
    countChatTokens: (messages, tools) => engine.countChatTokens(messages, tools),
    countTokens: (text) => engine.countTokens(text),
    maxConcurrency: () => engine.maxConcurrency(),
    close: () => engine.close(),
  };
}

/**
 * A speculative admission whose hold statement FAILS (rather than is refused): the job is queued first
 * and its short reply is generated before the hold statement gives up, here on the API pool's
 * statement timeout (SQLSTATE 57014) because another session holds the account's budget row. The client
 * is answered 503 database_unavailable, so the reply its worker generated must never be charged: the
 * worker, which waits for the admission to be decided before it records, must learn that it was not.
 */
describe("a speculative admission whose budget hold fails (through the HTTP API, real queue, worker and engine)", () => {
  let platform: TestPlatform;
  const calls: { ended: boolean; aborted: boolean }[] = [];
  beforeAll(async () => {
    platform = await startTestPlatform({ wrapEngine: (_model, engine) => watchedEngine(engine, calls) });
  });
  afterAll(async () => {
    await platform?.close();
  });

  const usageOf = async (completionId: string) =>
    (
      await platform.db.pool.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM es_events WHERE event_type = 'UsageRecorded' AND data->>'completionId' = $1",
        [completionId],
      )
    ).rows[0]!.n;
  const budgetOf = async (accountId: string) => {
    const r = await platform.db.pool.query<{ spent: string; held: string }>(
      "SELECT spent_micro_chf::bigint AS spent, held_micro_chf::bigint AS held FROM rm_budget WHERE account_id = $1",
      [accountId],
    );
    return { spent: Number(r.rows[0]!.spent), held: Number(r.rows[0]!.held) };
  };
  const openHolds = async (accountId: string) =>
    (await platform.db.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM budget_holds WHERE account_id = $1", [accountId])).rows[0]!.n;

  it("answers 503 and never charges the reply its job generated meanwhile", async () => {
    const { key, account } = await platform.createKey();
    const chat = () =>
      platform.request("POST", "/v1/chat/completions", { token: key, body: { model: TINY_CHAT, messages: [{ role: "user", content: "Hi" }], max_tokens: 3 } });
    // A first request (careful: hold first), fully settled: the account's budget is now known to be ample.
    const first = await chat();
    expect(first.status, first.text).toBe(200);
    expect(platform.inference.speculation.maySpeculate(account.accountId, 1, new Date())).toBe(true);
    await eventually(async () => ((await usageOf(first.body.id)) === 1 && (await openHolds(account.accountId)) === 0 ? true : undefined));
    const before = await budgetOf(account.accountId);
    expect(before.held).toBe(0);

    // Another session holds the account's budget row for longer than the API pool's statement timeout (1 s).
    const locker = new pg.Client({ connectionString: platform.db.url });
    await locker.connect();
    const start = vi.spyOn(platform.inference.gateway, "start");
    const callsBefore = calls.length;
    let failed: Awaited<ReturnType<typeof chat>>;
    let started: boolean[];
    let completionId: string;
    try {
      await locker.query("BEGIN");
      await locker.query("SELECT 1 FROM rm_budget WHERE account_id = $1 FOR UPDATE", [account.accountId]);
      failed = await chat();
      started = start.mock.calls.map(([request]) => request.speculative === true);
      completionId = start.mock.calls[0]![0].completionId;
    } finally {
      await locker.query("ROLLBACK").catch(() => undefined);
      await locker.end();
      start.mockRestore();
    }
    expect(failed.status, failed.text).toBe(503);
    expect(failed.body.error.code).toBe("database_unavailable");
    // The job was queued first (speculative) and its worker generated the whole reply before the 503.
    expect(started).toEqual([true]);
    expect(calls.slice(callsBefore)).toEqual([{ ended: true, aborted: false }]);

    // The worker decides: its job ends (and leaves the queue) once it knows the admission's outcome.
    // (Without a refusal it would wait ADMISSION_DECIDED_WITHIN_MS, 30 s, then charge the reply.)
    const queue = platform.inference.queues.queue(TINY_CHAT);
    await eventually(async () => ((await queue.getJob(completionId)) ? undefined : true), 40_000);

    expect(await usageOf(completionId)).toBe(0);
    expect(await budgetOf(account.accountId)).toEqual(before);
    expect(await openHolds(account.accountId)).toBe(0);
    const refusals = await platform.db.pool.query("SELECT count(*)::int AS n FROM refused_holds WHERE hold_id = $1", [completionId]);
    expect(refusals.rows[0].n).toBe(1);

    // The failure made the API careful for this account; its next request is served and charged.
    expect(platform.inference.speculation.maySpeculate(account.accountId, 1, new Date())).toBe(false);
    const next = await chat();
    expect(next.status, next.text).toBe(200);
    await eventually(async () => ((await usageOf(next.body.id)) === 1 && (await openHolds(account.accountId)) === 0 ? true : undefined));
    expect((await budgetOf(account.accountId)).spent).toBeGreaterThan(before.spent);
  }, 60_000);
});
