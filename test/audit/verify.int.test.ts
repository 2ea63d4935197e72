import { randomUUID } from "node:crypto";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { AuditCheckpointer } from "../../projections/auditCheckpointer.ts";
import { verifyAudit } from "../../projections/audit/verifyAudit.ts";
import { silentLogger } from "../../src/observability/logger.ts";
import { completionStreamId } from "../../src/ledger/usageRecordedEvent.ts";
import { eventuallyTrue } from "../support/eventually.ts";
import { operatorEdit } from "../support/operatorEdit.ts";
import { createTestDatabase, type TestDatabase } from "../support/testDatabase.ts";
import { appendToStream } from "../../src/ledger/eventStore/appendToStream.ts";
import { UsageRecorder } from "../../workers/completion/usageRecorder.ts";
import { usageEvent } from "../usage/usageFixtures.ts";
import { rewriteCheckpoint } from "./rewriteCheckpoint.ts";
import { buildAuditedLog, uncoveredEvents, type AuditedAccount } from "./auditFixtures.ts";

/**
 * `npm run audit -- verify` on a real history: it agrees with an untouched log, and pinpoints (stream,
 * version, what) a single row edited, removed or reordered, as an operator with the trigger disabled
 * could do. Each tampering test gets a fresh database.
 */
let db: TestDatabase;
let accounts: AuditedAccount[];

beforeEach(async () => {
  db = await createTestDatabase();
  accounts = await buildAuditedLog(db.pool);
});
afterEach(async () => {
  await db.drop();
});

async function findings(options: { accountId?: string; batchSize?: number } = {}) {
  const report = await verifyAudit(db.pool, { ...options, readModels: true });
  return report;
}

describe("audit verify", () => {
  it("agrees with an untouched log: chains, checkpoints, every charge recomputed, read models", async () => {
    const report = await findings();
    expect(report.findings).toEqual([]);
    expect(report.checkpoints.checkpoints).toBeGreaterThanOrEqual(2);
    expect(report.charges.charges).toBe(10);
    expect(report.priceVersions).toBe(2);
    expect(report.readModels!.length).toBeGreaterThan(0);
    const scoped = await findings({ accountId: accounts[0]!.accountId });
    expect(scoped.findings).toEqual([]);
    expect(scoped.charges.charges).toBe(5);
    // Batches of 2 events split the account streams across batches: the walk carries a stream over.
    const small = await findings({ batchSize: 2 });
    expect(small.findings).toEqual([]);
    expect(small.chains.events).toBe(report.chains.events);
  });

  it("names the stream and version of an edited event (data changed)", async () => {
    const stream = `account-${accounts[0]!.accountId}`;
    await operatorEdit(db.pool, (c) =>
      c.query("UPDATE es_events SET data = jsonb_set(data, '{name}', '\"evil\"') WHERE stream_id = $1 AND stream_version = 5", [stream]),
    );
    for (const batchSize of [undefined, 2]) {
      const report = await findings({ batchSize });
      expect(report.findings).toContainEqual(
        expect.objectContaining({ kind: "chain", streamId: stream, version: 5, message: expect.stringContaining("does not match the event's content") }),
      );
    }
  });

  it("names a charge whose cost was edited, with recorded and recomputed amounts, and the budget read model that now differs", async () => {
    const stream = completionStreamId(accounts[1]!.completionIds[3]!);
    await operatorEdit(db.pool, (c) => c.query("UPDATE es_events SET data = jsonb_set(data, '{costMicroChf}', '1') WHERE stream_id = $1", [stream]));
    const report = await findings();
    const messages = report.findings.filter((f) => f.streamId === stream).map((f) => `${f.kind} v${f.version}: ${f.message}`);
    expect(messages).toContainEqual(expect.stringMatching(/^chain v1: stored hash does not match/));
    expect(messages).toContainEqual(expect.stringMatching(/^charge v1: recorded cost 1 micro-CHF, recomputed \d+/));
    expect(report.findings).toContainEqual(expect.objectContaining({ kind: "read-model", message: expect.stringContaining("rm_budget.spent_micro_chf") }));
  });

  it("names a removed event: the gap in the stream, and the checkpoint that listed the head", async () => {
    const stream = `account-${accounts[1]!.accountId}`;
    await operatorEdit(db.pool, (c) => c.query("DELETE FROM es_events WHERE stream_id = $1 AND stream_version = 3", [stream]));
    const report = await findings();
    expect(report.findings).toContainEqual(
      expect.objectContaining({ kind: "chain", streamId: stream, version: 4, message: expect.stringContaining("version 3 missing") }),
    );
  });

  it("names a removed last event of a stream (the stream row still says it had it)", async () => {
    const stream = `account-${accounts[0]!.accountId}`;
    const head = Number((await db.pool.query<{ version: string }>("SELECT version FROM es_streams WHERE stream_id = $1", [stream])).rows[0]!.version);
    await operatorEdit(db.pool, (c) => c.query("DELETE FROM es_events WHERE stream_id = $1 AND stream_version = $2", [stream, head]));
    const report = await findings();
    expect(report.findings).toContainEqual(expect.objectContaining({ streamId: stream, version: head, message: expect.stringContaining("events removed") }));
    expect(report.findings).toContainEqual(expect.objectContaining({ kind: "checkpoint", streamId: stream, version: head }));
  });

  it("names a stream whose only event, recorded after the last checkpoint, was removed while its stream row stays", async () => {
    const account = accounts[0]!;
    const completionId = randomUUID();
    const recorded = await new UsageRecorder(db.pool).record(
      usageEvent({ accountId: account.accountId, keyId: account.keyIds[0]!, completionId, priceTableVersion: "audit-2" }).data,
      {},
    );
    expect(recorded).toBe("recorded");
    expect(await uncoveredEvents(db.pool)).toBe(1);
    const stream = completionStreamId(completionId);
    await operatorEdit(db.pool, (c) => c.query("DELETE FROM es_events WHERE stream_id = $1", [stream]));
    const report = await verifyAudit(db.pool, { readModels: false });
    expect(report.findings).toEqual([
      expect.objectContaining({ kind: "stream-head", streamId: stream, version: 1, message: expect.stringContaining("events removed") }),
    ]);
  });

  it("names a whole stream removed (events and stream row) through the checkpoint that committed to it", async () => {
    const stream = completionStreamId(accounts[0]!.completionIds[0]!);
    await operatorEdit(db.pool, async (c) => {
      await c.query("DELETE FROM es_events WHERE stream_id = $1", [stream]);
      await c.query("DELETE FROM es_streams WHERE stream_id = $1", [stream]);
    });
    const report = await findings();
    expect(report.findings).toContainEqual(
      expect.objectContaining({ kind: "checkpoint", streamId: stream, version: 1, message: expect.stringContaining("gone from the log") }),
    );
  });

  it("names two reordered events (their versions swapped)", async () => {
    const stream = `account-${accounts[0]!.accountId}`;
    await operatorEdit(db.pool, async (c) => {
      await c.query("UPDATE es_events SET stream_version = -1 WHERE stream_id = $1 AND stream_version = 3", [stream]);
      await c.query("UPDATE es_events SET stream_version = 3 WHERE stream_id = $1 AND stream_version = 4", [stream]);
      await c.query("UPDATE es_events SET stream_version = 4 WHERE stream_id = $1 AND stream_version = -1", [stream]);
    });
    const report = await findings();
    expect(report.findings).toContainEqual(
      expect.objectContaining({
        kind: "chain",
        streamId: stream,
        version: 3,
        message: expect.stringContaining("was recorded as version 4 and now sits at version 3"),
      }),
    );
    expect(report.findings).toContainEqual(
      expect.objectContaining({
        kind: "chain",
        streamId: stream,
        version: 4,
        message: expect.stringContaining("was recorded as version 3 and now sits at version 4"),
      }),
    );
  });

  it("names an event moved in the log order out of the checkpoint window that counted it", async () => {
    const stream = `account-${accounts[0]!.accountId}`;
    // Out of its window: the checkpoint that covered it counts one event less in its window now.
    await operatorEdit(db.pool, (c) => c.query("UPDATE es_events SET transaction_id = '99999999'::xid8 WHERE stream_id = $1 AND stream_version = 2", [stream]));
    const moved = await findings();
    expect(moved.findings).toContainEqual(
      expect.objectContaining({
        kind: "checkpoint",
        message: expect.stringMatching(/holds \d+ events, the checkpoint counted \d+ \(events moved in the log order/),
      }),
    );
  });

  it("names a later version logged before an earlier one of the same transaction, and a recorded_at moved by less than a millisecond", async () => {
    const stream = `test-${randomUUID()}`;
    await appendToStream(
      db.pool,
      stream,
      "test",
      [
        { type: "Noted", data: { i: 1 } },
        { type: "Noted", data: { i: 2 } },
        { type: "Noted", data: { i: 3 } },
      ],
      "no_stream",
    );
    expect((await findings()).findings).toEqual([]);
    await operatorEdit(db.pool, async (c) => {
      await c.query("UPDATE es_events SET global_position = global_position + 1000000 WHERE stream_id = $1 AND stream_version = 2", [stream]);
      await c.query("UPDATE es_events SET recorded_at = recorded_at + interval '999 microseconds' WHERE stream_id = $1 AND stream_version = 1", [stream]);
    });
    const report = await findings();
    expect(report.findings).toContainEqual(
      expect.objectContaining({
        kind: "chain",
        streamId: stream,
        version: 3,
        message: expect.stringContaining("logged before version 2 of its stream in the same transaction"),
      }),
    );
    expect(report.findings).toContainEqual(
      expect.objectContaining({ kind: "chain", streamId: stream, version: 1, message: expect.stringContaining("recorded_at has a fraction of a millisecond") }),
    );
  });

  it("names a checkpoint whose accounts root is not that of the log's streams per account", async () => {
    const last = await db.pool.query<{ v: string }>("SELECT version::text AS v FROM es_streams WHERE stream_id = 'audit-checkpoints'");
    const version = Number(last.rows[0]!.v);
    // Its chain recomputed, as an operator would: only the accounts root is wrong.
    await rewriteCheckpoint(db.pool, version, (data) => {
      data.accountsRoot = "0".repeat(64);
    });
    const report = await findings();
    expect(report.findings).toEqual([
      expect.objectContaining({ kind: "checkpoint", streamId: "audit-checkpoints", version, message: expect.stringContaining("accounts root") }),
    ]);
  });

  it("the application cannot update, delete or truncate es_events", async () => {
    await expect(db.pool.query("UPDATE es_events SET data = '{}' WHERE stream_version = 1")).rejects.toThrow(/append-only: UPDATE/);
    await expect(db.pool.query("DELETE FROM es_events")).rejects.toThrow(/append-only: DELETE/);
    await expect(db.pool.query("TRUNCATE es_events CASCADE")).rejects.toThrow(/append-only: TRUNCATE/);
    const report = await findings();
    expect(report.findings).toEqual([]);
  });
});

describe("audit verify scope and the projector's checkpointer", () => {
  it("restricts the walk to an account's streams or a time range, and names only what is in scope", async () => {
    const [first, second] = accounts as [AuditedAccount, AuditedAccount];
    const stream = completionStreamId(second.completionIds[0]!);
    await operatorEdit(db.pool, (c) => c.query("UPDATE es_events SET metadata = '{}' WHERE stream_id = $1", [stream]));
    const own = await verifyAudit(db.pool, { accountId: first.accountId, readModels: false });
    expect(own.findings).toEqual([]);
    expect(own.chains.streams).toBe(1 + first.completionIds.length);
    const others = await verifyAudit(db.pool, { accountId: second.accountId, readModels: false });
    expect(others.findings).toEqual([expect.objectContaining({ kind: "chain", streamId: stream, version: 1 })]);
    const future = await verifyAudit(db.pool, { from: new Date(Date.now() + 3600_000), readModels: false });
    expect(future.chains.events).toBe(0);
    expect(future.findings).toEqual([]);
    const all = await verifyAudit(db.pool, { from: new Date(0), to: new Date(Date.now() + 3600_000), readModels: false });
    expect(all.findings).toEqual([expect.objectContaining({ streamId: stream })]);
  });

  it("the projector's checkpointer covers what was appended since the last checkpoint", async () => {
    const before = await verifyAudit(db.pool, { readModels: false });
    for (let i = 0; i < 5; i++) await appendToStream(db.pool, `test-${randomUUID()}`, "test", [{ type: "Noted", data: { i } }], "no_stream");
    expect(await uncoveredEvents(db.pool)).toBe(5);
    const checkpointer = new AuditCheckpointer({ pool: db.pool, logger: silentLogger, intervalMs: 50 });
    checkpointer.start();
    try {
      const covered = await eventuallyTrue(async () => (await uncoveredEvents(db.pool)) === 0, 60_000);
      expect(covered).toBe(true);
    } finally {
      await checkpointer.stop();
    }
    const after = await verifyAudit(db.pool, { readModels: false });
    expect(after.findings).toEqual([]);
    expect(after.checkpoints.checkpoints).toBeGreaterThan(before.checkpoints.checkpoints);
  });
});
