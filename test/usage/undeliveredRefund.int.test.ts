import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HoldSweeper } from "../../src/ledger/budget/holdSweeper.ts";
import { placeHold } from "../../src/ledger/budget/placeHold.ts";
import { recordUsage } from "../../src/ledger/budget/recordUsage.ts";
import { noteUndelivered } from "../../src/ledger/budget/undeliveredReplies.ts";
import { readStream } from "../../src/ledger/eventStore/readStream.ts";
import { costMicroChf } from "../../src/ledger/pricing/costMicroChf.ts";
import { publishPriceTable } from "../../src/ledger/pricing/priceTable.ts";
import { completionStreamId } from "../../src/ledger/usageRecordedEvent.ts";
import { silentLogger } from "../../src/observability/logger.ts";
import { allProjections } from "../../projections/allProjections.ts";
import { rebuildProjections } from "../../projections/rebuildProjections.ts";
import { verifyAudit } from "../../projections/audit/verifyAudit.ts";
import { UsageRecorder } from "../../workers/completion/usageRecorder.ts";
import { operatorEdit } from "../support/operatorEdit.ts";
import { createTestDatabase, type TestDatabase } from "../support/testDatabase.ts";
import { budgetRow, createBudgetedAccount, usageEvent } from "./usageFixtures.ts";

/**
 * A reply the API gave up on (part of it lost with Redis, or its job silent) whose worker recorded the
 * whole usage before it heard what the client was sent: the API's note (undelivered_replies) makes the
 * projector's sweeper refund the rest, once, in the log (UsageRefunded), the budget and the usage read
 * models alike; an audit checks the refund against its charge.
 */
const MODEL = "refund-test";
const PRICES = { inputMicroChfPerMillion: 500_000, outputMicroChfPerMillion: 1_500_000 };
const HOUR = 3_600_000;

let db: TestDatabase;
let recorder: UsageRecorder;
let version: string;
beforeAll(async () => {
  db = await createTestDatabase();
  recorder = new UsageRecorder(db.pool);
  version = await publishPriceTable(db.pool, "refund-1", { [MODEL]: PRICES }, new Date(Date.now() - 60_000));
});
afterAll(async () => {
  await db.drop();
});

const sweeper = (now = () => new Date()) => new HoldSweeper({ pool: db.pool, clock: { now }, logger: silentLogger, maxHoldAgeMs: HOUR, intervalMs: 0 });
const period = () => `${new Date().toISOString().slice(0, 8)}01`;

/** One admitted request charged whole by its worker (hold placed, usage recorded and folded). */
async function charged(accountId: string, tokens: { promptTokens: number; completionTokens: number; reasoningTokens?: number }, keyId = randomUUID()) {
  const completionId = randomUUID();
  const hold = await placeHold(db.pool, { holdId: completionId, accountId, amountMicroChf: 10_000, now: new Date() });
  expect(hold.ok).toBe(true);
  const event = usageEvent({
    accountId,
    completionId,
    keyId,
    model: MODEL,
    priceTableVersion: version,
    reasoningTokens: 0,
    ...tokens,
    costMicroChf: costMicroChf(tokens, PRICES),
  });
  expect(await recorder.record(event.data, {})).toBe("recorded");
  return event.data;
}

async function completionEvents(completionId: string) {
  return (await readStream(db.pool, completionStreamId(completionId))).events;
}

async function notes(): Promise<string[]> {
  return (await db.pool.query<{ completion_id: string }>("SELECT completion_id FROM undelivered_replies ORDER BY completion_id")).rows.map(
    (r) => r.completion_id,
  );
}

describe("refunds of replies the API gave up on", () => {
  it("given a client sent nothing, refunds the whole charge once: in the log, the budget and the usage read models", async () => {
    const accountId = await createBudgetedAccount(db.pool, 1_000_000);
    const keyId = randomUUID();
    const kept = await charged(accountId, { promptTokens: 100, completionTokens: 10 }, keyId);
    const lost = await charged(accountId, { promptTokens: 1_000, completionTokens: 400, reasoningTokens: 100 }, keyId);
    expect((await budgetRow(db.pool, accountId, period()))!.spent).toBe(kept.costMicroChf + lost.costMicroChf);

    await noteUndelivered(db.pool, lost.completionId, -1);
    await sweeper().sweepOnce();

    const events = await completionEvents(lost.completionId);
    expect(events.map((e) => [e.type, e.streamVersion])).toEqual([
      ["UsageRecorded", 1],
      ["UsageRefunded", 2],
    ]);
    expect(events[1]!.data).toMatchObject({
      promptTokens: 1_000,
      completionTokens: 400,
      reasoningTokens: 100,
      costMicroChf: lost.costMicroChf,
      deliveredCompletionTokens: null,
      chargedAt: lost.finishedAt,
      reason: "undelivered",
    });
    expect((await budgetRow(db.pool, accountId, period()))!.spent).toBe(kept.costMicroChf);
    expect(await notes()).not.toContain(lost.completionId);

    // Swept again (or noted again): never refunded twice.
    await noteUndelivered(db.pool, lost.completionId, -1);
    await sweeper().sweepOnce();
    expect(await completionEvents(lost.completionId)).toHaveLength(2);
    expect((await budgetRow(db.pool, accountId, period()))!.spent).toBe(kept.costMicroChf);

    // The usage read models count the request, net of the refund.
    await rebuildProjections(db.pool, allProjections);
    const usage = await db.pool.query(
      "SELECT requests, prompt_tokens, completion_tokens, reasoning_tokens, cost_micro_chf FROM rm_account_usage_daily WHERE account_id = $1",
      [accountId],
    );
    expect(usage.rows.map((r) => Object.values(r).map(Number))).toEqual([[2, 100, 10, 0, kept.costMicroChf]]);
    const byKey = await db.pool.query("SELECT requests, cost_micro_chf FROM rm_key_usage_daily WHERE key_id = $1", [keyId]);
    expect(byKey.rows.map((r) => [Number(r.requests), Number(r.cost_micro_chf)])).toEqual([[2, kept.costMicroChf]]);
  });

  it("given part of the reply sent, keeps the prompt and the sent tokens charged", async () => {
    const accountId = await createBudgetedAccount(db.pool, 1_000_000);
    const lost = await charged(accountId, { promptTokens: 1_000, completionTokens: 400 });
    await noteUndelivered(db.pool, lost.completionId, 150);
    await sweeper().sweepOnce();
    const stays = costMicroChf({ promptTokens: 1_000, completionTokens: 150 }, PRICES);
    expect((await completionEvents(lost.completionId))[1]!.data).toMatchObject({
      promptTokens: 0,
      completionTokens: 250,
      costMicroChf: lost.costMicroChf - stays,
      deliveredCompletionTokens: 150,
    });
    expect((await budgetRow(db.pool, accountId, period()))!.spent).toBe(stays);
  });

  it("given the worker heard in time (its charge within what was sent), refunds nothing and drops the note", async () => {
    const accountId = await createBudgetedAccount(db.pool, 1_000_000);
    const heard = await charged(accountId, { promptTokens: 1_000, completionTokens: 150 });
    await noteUndelivered(db.pool, heard.completionId, 150);
    await sweeper().sweepOnce();
    expect(await completionEvents(heard.completionId)).toHaveLength(1);
    expect(await notes()).not.toContain(heard.completionId);
    expect((await budgetRow(db.pool, accountId, period()))!.spent).toBe(heard.costMicroChf);
  });

  it("given the note before the usage (the job still running), or the usage not folded yet, waits for them", async () => {
    const accountId = await createBudgetedAccount(db.pool, 1_000_000);
    const completionId = randomUUID();
    await placeHold(db.pool, { holdId: completionId, accountId, amountMicroChf: 10_000, now: new Date() });
    await noteUndelivered(db.pool, completionId, -1);
    await sweeper().sweepOnce();
    expect(await notes()).toContain(completionId);

    // Recorded, but its fold lost (a crash between the two halves): not in the spend yet, so not refunded yet.
    const tokens = { promptTokens: 500, completionTokens: 50 };
    const event = usageEvent({ accountId, completionId, model: MODEL, priceTableVersion: version, ...tokens, costMicroChf: costMicroChf(tokens, PRICES) });
    expect((await recordUsage(db.pool, event)).recorded).toBe(true);
    await sweeper().sweepOnce();
    expect(await completionEvents(completionId)).toHaveLength(1);
    expect(await notes()).toContain(completionId);

    // Later the sweeper folds it, and refunds it in the same sweep.
    await sweeper(() => new Date(Date.now() + 11_000)).sweepOnce();
    expect((await completionEvents(completionId)).map((e) => e.type)).toEqual(["UsageRecorded", "UsageRefunded"]);
    expect(await budgetRow(db.pool, accountId, period())).toMatchObject({ spent: 0, held: 0 });
  });

  it("drops a note whose completion never records a usage (it charged nothing, or never ran)", async () => {
    const completionId = randomUUID();
    await noteUndelivered(db.pool, completionId, 12);
    await sweeper(() => new Date(Date.now() + HOUR)).sweepOnce();
    expect(await notes()).toContain(completionId);
    await sweeper(() => new Date(Date.now() + 2 * HOUR + 60_000)).sweepOnce();
    expect(await notes()).not.toContain(completionId);
  });

  it("passes the audit (the refunds checked against their charges, the read models rebuilt from the log), and fails a tampered refund", async () => {
    await rebuildProjections(db.pool, allProjections);
    const report = await verifyAudit(db.pool);
    expect(report.findings).toEqual([]);
    expect(report.charges.refunds).toBe(3);

    const accountId = await createBudgetedAccount(db.pool, 1_000_000);
    const lost = await charged(accountId, { promptTokens: 1_000, completionTokens: 400 });
    await noteUndelivered(db.pool, lost.completionId, 100);
    await sweeper().sweepOnce();
    await operatorEdit(db.pool, (client) =>
      client.query(
        "UPDATE es_events SET data = jsonb_set(data, '{costMicroChf}', to_jsonb((data->>'costMicroChf')::bigint + 1)) WHERE stream_id = $1 AND event_type = 'UsageRefunded'",
        [completionStreamId(lost.completionId)],
      ),
    );
    const tampered = await verifyAudit(db.pool, { readModels: false });
    expect(tampered.findings.map((f) => f.message)).toContainEqual(expect.stringMatching(/^refunded \d+ micro-CHF .* give \d+ micro-CHF/));
  });
});
