import { spawn, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { UsageRecorder } from "../../workers/completion/usageRecorder.ts";
import type { UsageRecorded } from "../../src/ledger/usageRecordedEvent.ts";
import { allProjections } from "../../projections/allProjections.ts";
import { PROJECTION_LOCK_SPACE } from "../../projections/projectionLocks.ts";
import { replayReadModels } from "../../projections/replayReadModels.ts";
import { createTestDatabase, type TestDatabase } from "../support/testDatabase.ts";
import { createBudgetedAccount, usageEvent } from "../usage/usageFixtures.ts";
import { eventually, eventuallyTrue } from "../support/eventually.ts";
import { expectedUsage, liveUsage } from "./usageExpectations.ts";

const PROJECTOR_MAIN = fileURLToPath(new URL("../../projections/main.ts", import.meta.url));

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});

/** The projector as its own OS process (node projections/main.ts), small batches so a kill lands mid-work. */
function spawnProjector(): ChildProcess {
  return spawn(process.execPath, [PROJECTOR_MAIN], {
    env: {
      PATH: process.env.PATH,
      DATABASE_URL: db.url,
      PROJECTOR_POLL_MS: "10",
      PROJECTOR_BATCH_SIZE: "3",
      BUDGET_SWEEP_INTERVAL_S: "0",
      LOG_LEVEL: "error",
    },
    stdio: ["ignore", "ignore", "inherit"],
  });
}

function exited(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve() : child.once("exit", () => resolve())));
}

async function projectedRequests(): Promise<number> {
  const r = await db.pool.query<{ n: string | null }>("SELECT sum(requests) AS n FROM rm_key_usage_daily");
  return Number(r.rows[0]!.n ?? 0);
}

/** Whether a projector holds a projection's active lock in this database (it is projecting). */
async function projectorActive(): Promise<boolean> {
  const r = await db.pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM pg_locks
      WHERE locktype = 'advisory' AND classid = $1 AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
    [PROJECTION_LOCK_SPACE.active],
  );
  return r.rows[0]!.n > 0;
}

const pick = <T>(items: T[]) => items[Math.floor(Math.random() * items.length)]!;

describe("projector crash safety", () => {
  it("ends in the state of an uninterrupted run after being SIGKILLed at random moments while events are appended", async () => {
    const accounts = [await createBudgetedAccount(db.pool, 10_000_000_000), await createBudgetedAccount(db.pool, 10_000_000_000)];
    // A key belongs to one account (as in life): two keys per account.
    const keys = accounts.flatMap((accountId) => [randomUUID(), randomUUID()].map((keyId) => ({ accountId, keyId })));
    const days = ["2025-06-28", "2025-06-29", "2025-06-30", "2025-07-01"];
    const events: UsageRecorded["data"][] = [];

    let writing = true;
    const recorder = new UsageRecorder(db.pool);
    const writer = (async () => {
      for (let round = 0; round < 60; round++) {
        const batch = Array.from(
          { length: 5 },
          () =>
            usageEvent({
              ...pick(keys),
              model: pick(["m-a", "m-b", "m-c"]),
              promptTokens: Math.floor(Math.random() * 500),
              completionTokens: Math.floor(Math.random() * 300),
              reasoningTokens: Math.floor(Math.random() * 20),
              costMicroChf: Math.floor(Math.random() * 1000),
              ...(Math.random() < 0.3 ? { batchDiscountBps: 5000 } : {}),
              finishedAt: `${pick(days)}T${String(Math.floor(Math.random() * 24)).padStart(2, "0")}:${String(Math.floor(Math.random() * 60)).padStart(2, "0")}:00.000Z`,
            }).data,
        );
        // One worker's recorder: the five usages are group-committed as in production.
        expect(await Promise.all(batch.map((data) => recorder.record(data, {})))).toEqual(batch.map(() => "recorded"));
        events.push(...batch);
        await new Promise((r) => setTimeout(r, 40));
      }
      writing = false;
    })();

    // Kill the projector at random moments, over and over, while the writer appends.
    let kills = 0;
    const applied: number[] = [];
    while (writing || kills < 6) {
      const child = spawnProjector();
      // Kill it at a random moment once it is projecting (its start-up time varies with the machine's load).
      await eventually(async () => ((await projectorActive()) ? true : undefined), 20_000);
      await new Promise((r) => setTimeout(r, 50 + Math.random() * 600));
      child.kill("SIGKILL");
      await exited(child);
      kills++;
      applied.push(await projectedRequests());
    }
    await writer;
    expect(events).toHaveLength(300);

    // Restart and let it catch up undisturbed.
    const final = spawnProjector();
    try {
      const expected = expectedUsage(events);
      const caughtUp = await eventuallyTrue(async () => JSON.stringify(await liveUsage(db.pool, accounts)) === JSON.stringify(expected), 45_000, 100);
      if (!caughtUp) {
        const _activity = await db.pool.query(
          "SELECT pid, state, backend_xid::text, xact_start, left(query, 100) AS query FROM pg_stat_activity WHERE datname = current_database()",
        );
        const _locks = await db.pool.query("SELECT pid, objid, granted FROM pg_locks WHERE locktype = 'advisory'");
        const checkpoints = await db.pool.query("SELECT * FROM es_checkpoints");
        const snapshot = await db.pool.query("SELECT pg_current_snapshot()::text AS s, (SELECT max(transaction_id)::text FROM es_events) AS max_tx");
        const live = await liveUsage(db.pool, accounts);
        const onlyLive = live.keyDays.filter((r) => !expected.keyDays.some((e) => JSON.stringify(e) === JSON.stringify(r)));
        const onlyExpected = expected.keyDays.filter((e) => !live.keyDays.some((r) => JSON.stringify(e) === JSON.stringify(r)));
        const replay = await replayReadModels(db.pool, allProjections);
        const logged = await db.pool.query("SELECT count(*)::int AS n FROM es_events WHERE event_type = 'UsageRecorded'");
        process.stdout.write(
          `${JSON.stringify({ exitCode: final.exitCode, checkpoints: checkpoints.rows, snapshot: snapshot.rows, onlyLive, onlyExpected, replayDiff: replay.differences, logged: logged.rows, events: events.length }, null, 1)}\n`,
        );
      }
      expect(caughtUp).toBe(true);
      expect(await liveUsage(db.pool, accounts)).toEqual(expected);
    } finally {
      final.kill("SIGTERM");
      await exited(final);
    }
    process.stdout.write(`projector killed ${kills} times; requests projected after each kill: ${applied.join(", ")}\n`);
    // The kills did land while the projector was working (it had projected some but not all events).
    expect(applied.some((n) => n > 0 && n < 300)).toBe(true);
    // An uninterrupted run from the log (replay) gives the same tables.
    const report = await replayReadModels(db.pool, allProjections);
    if (report.differences) {
      // Seen once (session 7, full suite): the rebuild counted about 12% more usage than the live tables
      // and the live budget, which both matched the 300 settles. This tells apart a log with extra
      // events, a replay that read some twice, and a passing disturbance (a second replay).
      const logged = await db.pool.query("SELECT event_type, count(*)::int AS n, count(DISTINCT stream_id)::int AS streams FROM es_events GROUP BY event_type");
      const checkpoints = await db.pool.query("SELECT * FROM es_checkpoints");
      const again = await replayReadModels(db.pool, allProjections);
      const diagnosis = {
        eventsRead: report.eventsRead,
        logged: logged.rows,
        checkpoints: checkpoints.rows,
        again: { eventsRead: again.eventsRead, differences: again.differences },
      };
      process.stdout.write(`replay differs from the live read models: ${JSON.stringify(diagnosis)}\n`);
    }
    expect(report.models.filter((m) => m.onlyLive.length || m.onlyRebuilt.length)).toEqual([]);
  }, 120_000);
});
