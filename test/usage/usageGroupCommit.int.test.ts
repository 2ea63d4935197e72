import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { createInterface } from "node:readline";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { placeHold } from "../../src/ledger/budget/placeHold.ts";
import { UsageGroupCommit } from "../../src/ledger/budget/usageGroupCommit.ts";
import { completionStreamId, type UsageRecorded } from "../../src/ledger/usageRecordedEvent.ts";
import { UsageRecorder } from "../../workers/completion/usageRecorder.ts";
import { eventually } from "../support/eventually.ts";
import { createTestDatabase, type TestDatabase } from "../support/testDatabase.ts";
import { budgetRow, createBudgetedAccount, openHolds, usageEvent } from "./usageFixtures.ts";

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db?.drop();
});

const NOW = new Date("2026-05-10T12:00:00.000Z");
const PERIOD = "2026-05-01";
const HOLD = 5_000;

/** An account with `count` admitted requests (holds placed) and their usage events, costs 100, 101, ... */
async function admittedRequests(count: number): Promise<{ accountId: string; events: UsageRecorded[] }> {
  const accountId = await createBudgetedAccount(db.pool, 10_000_000, NOW);
  const events: UsageRecorded[] = [];
  for (let i = 0; i < count; i++) {
    const completionId = `chatcmpl-${randomUUID().replaceAll("-", "")}`;
    const hold = await placeHold(db.pool, { holdId: completionId, accountId, amountMicroChf: HOLD, now: NOW });
    expect(hold.ok).toBe(true);
    events.push(usageEvent({ accountId, completionId, costMicroChf: 100 + i, finishedAt: NOW.toISOString() }));
  }
  return { accountId, events };
}

/** Per completion: how many UsageRecorded events it has, and the transactions that wrote them. */
async function recordedIn(events: UsageRecorded[]): Promise<{ counts: number[]; transactions: number }> {
  const ids = events.map((e) => completionStreamId(e.data.completionId));
  const { rows } = await db.pool.query<{ stream_id: string; xmin: string }>(
    "SELECT stream_id, xmin::text FROM es_events WHERE stream_id = ANY($1) AND event_type = 'UsageRecorded'",
    [ids],
  );
  return { counts: ids.map((id) => rows.filter((r) => r.stream_id === id).length), transactions: new Set(rows.map((r) => r.xmin)).size };
}

const totalCost = (events: UsageRecorded[]) => events.reduce((sum, e) => sum + e.data.costMicroChf, 0);

describe("group commit of usage records", () => {
  it("records the usages that finish together in one transaction, each exactly once, and settles the budget", async () => {
    const { accountId, events } = await admittedRequests(20);
    const recorder = new UsageRecorder(db.pool);
    // A job whose usage arrives twice in the same batch (a redelivered job racing its first run).
    const outcomes = await Promise.all([...events, events[3]!].map((e) => recorder.record(e.data, { actor: "worker" })));
    expect(outcomes.filter((o) => o === "recorded")).toHaveLength(20);
    expect(outcomes.filter((o) => o === "already_recorded")).toHaveLength(1);
    const recorded = await recordedIn(events);
    expect(recorded.counts).toEqual(events.map(() => 1));
    // One durable transaction for all of them, not one each.
    expect(recorded.transactions).toBe(1);
    expect(await budgetRow(db.pool, accountId, PERIOD)).toMatchObject({ spent: totalCost(events), held: 0 });
    expect(await openHolds(db.pool, accountId)).toBe(0);
    // Recorded again (a retried settle): nothing changes.
    expect(await Promise.all(events.map((e) => recorder.record(e.data, {})))).toEqual(events.map(() => "already_recorded"));
    expect((await recordedIn(events)).counts).toEqual(events.map(() => 1));
    expect(await budgetRow(db.pool, accountId, PERIOD)).toMatchObject({ spent: totalCost(events), held: 0 });
  });

  it("when a statement fails mid-batch, records every other usage once on its own and gives the error to the failing one only", async () => {
    const { events } = await admittedRequests(10);
    const poisoned = events[5]!;
    const stream = completionStreamId(poisoned.data.completionId);
    // A real database error in the middle of the batch's transaction, for one completion only.
    await db.pool.query(`
      CREATE FUNCTION refuse_poisoned_stream() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.stream_id = '${stream}' THEN RAISE EXCEPTION 'refused for the test'; END IF;
        RETURN NEW;
      END $$;
      CREATE TRIGGER refuse_poisoned_stream BEFORE INSERT ON es_events FOR EACH ROW EXECUTE FUNCTION refuse_poisoned_stream();`);
    try {
      const commits = new UsageGroupCommit(db.pool);
      const results = await Promise.allSettled(events.map((e) => commits.record(e)));
      results.forEach((result, i) => {
        if (i === 5) expect(result.status).toBe("rejected");
        else expect(result).toEqual({ status: "fulfilled", value: { recorded: true, releasedMicroChf: HOLD, admission: "admitted" } });
      });
      expect((await recordedIn(events)).counts).toEqual(events.map((_, i) => (i === 5 ? 0 : 1)));
      const hold = await db.pool.query("SELECT settled_at FROM budget_holds WHERE hold_id = $1", [poisoned.data.completionId]);
      expect(hold.rows).toEqual([{ settled_at: null }]);
    } finally {
      await db.pool.query("DROP TRIGGER refuse_poisoned_stream ON es_events; DROP FUNCTION refuse_poisoned_stream()");
    }
    // Its caller retries (UsageRecorder does): now it is recorded, once.
    expect(await new UsageGroupCommit(db.pool).record(poisoned)).toMatchObject({ recorded: true });
    expect((await recordedIn(events)).counts).toEqual(events.map(() => 1));
  });

  it("commits nothing of a batch whose process is killed mid-transaction; recording again charges each usage exactly once", async () => {
    const { accountId, events } = await admittedRequests(8);
    // Hold the sixth request's hold row locked, so the child's batch stops at its settled mark, the eight
    // usages appended in its open transaction.
    const blocker = new pg.Client({ connectionString: db.url });
    await blocker.connect();
    let child: ReturnType<typeof spawn> | null = null;
    try {
      await blocker.query("BEGIN");
      await blocker.query("SELECT 1 FROM budget_holds WHERE hold_id = $1 FOR UPDATE", [events[5]!.data.completionId]);
      child = spawn(process.execPath, ["test/usage/groupCommitChild.ts"], {
        env: { ...process.env, DATABASE_URL: db.url },
        stdio: ["pipe", "pipe", "inherit"],
      });
      const lines: string[] = [];
      createInterface({ input: child.stdout! }).on("line", (line) => lines.push(line));
      child.stdin!.end(JSON.stringify(events));
      const waiting = await eventually(async () => {
        const { rows } = await db.pool.query<{ pid: number }>(
          "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = 'Lock' AND query LIKE '%INSERT INTO budget_holds%'",
          [db.name],
        );
        return rows[0]?.pid;
      });
      // Mid-batch: the usages are written in the child's transaction, none is visible, none answered.
      expect((await recordedIn(events)).counts).toEqual(events.map(() => 0));
      expect(lines).toEqual(["queued"]);
      const exited = new Promise((resolve) => child!.once("exit", resolve));
      child.kill("SIGKILL");
      await exited;
      await blocker.query("ROLLBACK");
      // The killed process's backend ends once it finds its client gone, rolling the batch back.
      await eventually(async () => {
        const { rows } = await db.pool.query("SELECT 1 FROM pg_stat_activity WHERE pid = $1", [waiting]);
        return rows.length === 0 ? true : undefined;
      });
      expect((await recordedIn(events)).counts).toEqual(events.map(() => 0));
      const settled = await db.pool.query("SELECT count(*)::int AS n FROM budget_holds WHERE account_id = $1 AND settled_at IS NOT NULL", [accountId]);
      expect(settled.rows[0]).toEqual({ n: 0 });
    } finally {
      if (child && child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      await blocker.end();
    }
    // The jobs run again (their worker died before completing them) and record their usage: once each.
    const recorder = new UsageRecorder(db.pool);
    expect(await Promise.all(events.map((e) => recorder.record(e.data, {})))).toEqual(events.map(() => "recorded"));
    expect((await recordedIn(events)).counts).toEqual(events.map(() => 1));
    expect(await budgetRow(db.pool, accountId, PERIOD)).toMatchObject({ spent: totalCost(events), held: 0 });
    expect(await openHolds(db.pool, accountId)).toBe(0);
  }, 60_000);
});
