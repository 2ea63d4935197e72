import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { PoolClient } from "../../src/db/createPool.ts";
import { billingPeriod } from "../../src/ledger/budget/billingPeriod.ts";
import type { UsageRecorded } from "../../src/ledger/usageRecordedEvent.ts";
import { silentLogger } from "../../src/observability/logger.ts";
import { allProjections } from "../../projections/allProjections.ts";
import type { Projection } from "../../projections/projection.ts";
import { ProjectionRunner } from "../../projections/projectionRunner.ts";
import { projectNextBatch } from "../../projections/projectNextBatch.ts";
import { rebuildProjections } from "../../projections/rebuildProjections.ts";
import { replayReadModels } from "../../projections/replayReadModels.ts";
import { eventuallyTrue } from "../support/eventually.ts";
import { ensureServerTransactionIdsPast, insertEventsAt } from "../support/logAtTransactionIds.ts";
import { createTestDatabase, type TestDatabase } from "../support/testDatabase.ts";
import { usageEvent } from "../usage/usageFixtures.ts";
import { expectedUsage, liveUsage } from "./usageExpectations.ts";

const run = promisify(execFile);
const REPLAY_CLI = new URL("../../projections/replay.ts", import.meta.url).pathname;

/**
 * UsageRecorded events whose transaction ids straddle 9,999 / 10,000 and 99,999 / 100,000 (the case
 * where a text-ordered reader projected 4,319 of 4,969 events): the projector, the replay and the
 * rebuild must count each of them once.
 */
let db: TestDatabase;
const accountId = randomUUID();
const transactionIds = [100_000n, 9_999n, 5n, 10_000n, 99_999n, 10_001n, 100_000n, 9_998n, 10_000n, 99_998n, 100_001n, 9_999n, 1_000n];
const usage: UsageRecorded["data"][] = transactionIds.map(
  (_, i) =>
    usageEvent({
      accountId,
      keyId: `key-${i % 3}`,
      model: `m${i % 2}`,
      promptTokens: 10 + i,
      completionTokens: 2 * i,
      costMicroChf: 1_000 + i,
      finishedAt: new Date(Date.UTC(2026, 10, 1 + (i % 4), 12)).toISOString(),
    }).data,
);

beforeAll(async () => {
  db = await createTestDatabase();
  await ensureServerTransactionIdsPast(db.pool, 200_000);
  await insertEventsAt(
    db.pool,
    transactionIds.map((transactionId, i) => ({ transactionId, type: "UsageRecorded", data: usage[i]!, streamId: `completion-${usage[i]!.completionId}` })),
  );
  // What settling these requests charged to the budget (the replay checks rm_budget.spent against the log).
  for (const u of usage) {
    await db.pool.query(
      `INSERT INTO rm_budget AS b (account_id, period_start, budget_micro_chf, spent_micro_chf) VALUES ($1, $2, 1000000000, $3)
       ON CONFLICT (account_id, period_start) DO UPDATE SET spent_micro_chf = b.spent_micro_chf + EXCLUDED.spent_micro_chf`,
      [accountId, billingPeriod(new Date(u.finishedAt)).start, u.costMicroChf],
    );
  }
});
afterAll(async () => {
  await db.drop();
});

const expected = () => expectedUsage([...usage]);
const live = () => liveUsage(db.pool, [accountId]);
const projectedTables = allProjections.flatMap((p) => p.tables);

async function resetProjections(): Promise<void> {
  for (const table of projectedTables) await db.pool.query(`DELETE FROM ${table}`);
  await db.pool.query("DELETE FROM es_checkpoints");
}

async function projectToEnd(batchSize: number, project: (client: PoolClient, p: Projection, batchSize: number) => Promise<number>): Promise<void> {
  const client = await db.pool.connect();
  try {
    for (const p of allProjections) while ((await project(client, p, batchSize)) > 0);
  } finally {
    client.release();
  }
}

/**
 * The projector as it was before the fix: the selected text alias `transaction_id` shadowed the xid8
 * column in ORDER BY, so batches came in text order while the cursor compared numbers.
 */
async function projectNextBatchInTextOrder(client: PoolClient, projection: Projection, batchSize: number): Promise<number> {
  await client.query("BEGIN");
  const cp = await client.query<{ tx: string; gp: string }>(
    "SELECT transaction_id::text AS tx, global_position::text AS gp FROM es_checkpoints WHERE projection = $1",
    [projection.name],
  );
  const from = cp.rows[0] ?? { tx: "0", gp: "0" };
  const rows = await client.query<{
    transaction_id: string;
    global_position: string;
    event_id: string;
    stream_id: string;
    event_type: string;
    data: Record<string, unknown>;
  }>(
    `SELECT event_id, stream_id, global_position, transaction_id::text AS transaction_id, event_type, data FROM es_events
      WHERE (transaction_id, global_position) > ($1::xid8, $2::bigint) ORDER BY transaction_id, global_position LIMIT $3`,
    [from.tx, from.gp, batchSize],
  );
  await projection.apply(
    client,
    rows.rows.map((r) => ({
      eventId: r.event_id,
      streamId: r.stream_id,
      streamVersion: 1,
      globalPosition: String(r.global_position),
      transactionId: r.transaction_id,
      type: r.event_type,
      schemaVersion: 1,
      data: r.data,
      metadata: {},
      recordedAt: new Date(),
    })),
  );
  const last = rows.rows.at(-1);
  if (last) {
    await client.query(
      `INSERT INTO es_checkpoints (projection, transaction_id, global_position) VALUES ($1, $2::xid8, $3)
       ON CONFLICT (projection) DO UPDATE SET transaction_id = EXCLUDED.transaction_id, global_position = EXCLUDED.global_position`,
      [projection.name, last.transaction_id, last.global_position],
    );
  }
  await client.query("COMMIT");
  return rows.rows.length;
}

describe("projections across transaction ids 9,999 / 10,000 and 99,999 / 100,000", () => {
  it("the projector counts every UsageRecorded once, in batches of every size from 1 up", async () => {
    for (let batchSize = 1; batchSize <= usage.length + 1; batchSize++) {
      await resetProjections();
      await projectToEnd(batchSize, projectNextBatch);
      expect(await live(), `batch size ${batchSize}`).toEqual(expected());
    }
  });

  it("the replay reads every event once and finds no difference, in batches of every size from 1 up", async () => {
    for (let batchSize = 1; batchSize <= usage.length + 1; batchSize++) {
      const report = await replayReadModels(db.pool, allProjections, { batchSize });
      expect(report.eventsRead, `batch size ${batchSize}`).toBe(usage.length);
      expect(
        report.models.filter((m) => m.onlyLive.length || m.onlyRebuilt.length),
        `batch size ${batchSize}`,
      ).toEqual([]);
    }
  });

  it("read models built by the text-ordered reader: `npm run replay` shows the difference, `npm run replay -- --rebuild` repairs it", async () => {
    await resetProjections();
    await projectToEnd(3, projectNextBatchInTextOrder);
    const broken = await live();
    const countedRequests = broken.keyDays.reduce((n, k) => n + k.requests, 0);
    expect(countedRequests).toBeLessThan(usage.length);

    const env = { ...process.env, DATABASE_URL: db.url };
    const compare = await run(process.execPath, [REPLAY_CLI], { env }).then(
      () => ({ code: 0, stdout: "" }),
      (error: { code: number; stdout: string }) => ({ code: error.code, stdout: error.stdout }),
    );
    expect(compare.code).toBe(1);
    expect(compare.stdout).toMatch(/^DIFF rm_key_usage_daily/m);
    expect(compare.stdout).toMatch(/^DIFF rm_account_usage_daily/m);

    const rebuilt = await run(process.execPath, [REPLAY_CLI, "--rebuild"], { env });
    expect(rebuilt.stdout).toContain(`rebuilt key_usage_daily: ${usage.length} events applied`);
    expect(rebuilt.stdout).toMatch(/0 read model\(s\) differ/);
    expect(await live()).toEqual(expected());
  });

  it("a rebuild while a projector runs re-projects every event once", async () => {
    await resetProjections();
    const runner = new ProjectionRunner({ pool: db.pool, logger: silentLogger, projections: allProjections, batchSize: 2, pollIntervalMs: 5 });
    runner.start();
    try {
      const caughtUp = async () => JSON.stringify(await live()) === JSON.stringify(expected());
      expect(await eventuallyTrue(caughtUp)).toBe(true);
      await Promise.all([rebuildProjections(db.pool, allProjections, 1), rebuildProjections(db.pool, allProjections, 3)]);
      await rebuildProjections(db.pool, allProjections, 2);
      expect(await eventuallyTrue(caughtUp)).toBe(true);
      // Settled: nothing more to apply, and still each event once.
      await new Promise((r) => setTimeout(r, 100));
      expect(await live()).toEqual(expected());
    } finally {
      await runner.stop();
    }
  });
});
