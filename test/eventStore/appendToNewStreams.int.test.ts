import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { withTransaction } from "../../src/db/withTransaction.ts";
import { appendToNewStreams, appendToStream, readStream, type NewStreamAppend } from "../../src/ledger/eventStore/index.ts";
import type { Queryable } from "../../src/ledger/eventStore/types.ts";
import type { AuditFinding } from "../../projections/audit/auditFinding.ts";
import { verifyChains } from "../../projections/audit/verifyChains.ts";
import { createTestDatabase, type TestDatabase } from "../support/testDatabase.ts";

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});

const event = (n: number) => ({ type: "Counted", data: { n } });
const newStream = (...ns: number[]): NewStreamAppend => ({ streamId: `test-${randomUUID()}`, streamType: "test", events: ns.map(event) });

/** What the audit verifier finds wrong with these streams' chains (nothing, for a sound log). */
async function chainFindings(streamIds: string[]): Promise<AuditFinding[]> {
  const findings: AuditFinding[] = [];
  await verifyChains(db.pool, streamIds, (finding) => findings.push(finding));
  return findings;
}

/** `db` that counts the statements sent through it. */
function counting(db: Queryable): Queryable & { sent: number } {
  const wrapped = {
    sent: 0,
    query: ((...args: Parameters<Queryable["query"]>) => {
      wrapped.sent += 1;
      return (db.query as (...a: unknown[]) => unknown)(...args);
    }) as Queryable["query"],
  };
  return wrapped;
}

describe("appendToNewStreams", () => {
  it("creates every stream with its events in one statement, chained and in log order, as appendToStream would", async () => {
    // Given three streams that do not exist yet
    const appends = [newStream(1), newStream(2, 3, 4), newStream(5)];
    // When they are appended together in one transaction
    const outcomes = await withTransaction(db.pool, async (client) => {
      const counted = counting(client);
      const result = await appendToNewStreams(counted, appends);
      expect(counted.sent).toBe(1);
      return result;
    });
    // Then each is created at the version of its last event, with its events in order
    expect(outcomes).toEqual(["appended", "appended", "appended"]);
    for (const append of appends) {
      const read = await readStream(db.pool, append.streamId);
      expect(read.version).toBe(append.events.length);
      expect(read.events.map((e) => [e.streamVersion, e.data])).toEqual(append.events.map((e, i) => [i + 1, e.data]));
    }
    // And the log's order is the order given, all in one transaction
    const rows = await db.pool.query<{ n: number; tx: string }>(
      "SELECT (data->>'n')::int AS n, transaction_id::text AS tx FROM es_events WHERE stream_id = ANY($1) ORDER BY global_position",
      [appends.map((a) => a.streamId)],
    );
    expect(rows.rows.map((r) => r.n)).toEqual([1, 2, 3, 4, 5]);
    expect(new Set(rows.rows.map((r) => r.tx)).size).toBe(1);
    // And the audit verifier finds every hash chain and head hash sound
    expect(await chainFindings(appends.map((a) => a.streamId))).toEqual([]);
  });

  it("appends nothing to a stream that exists or whose first event is stored, like appendToStream with no_stream", async () => {
    // Given a stream that exists, and an event already stored (in a stream of its own)
    const existing = newStream(1);
    await appendToStream(db.pool, existing.streamId, "test", existing.events, "no_stream");
    const eventId = randomUUID();
    const stored = { streamId: `test-${randomUUID()}`, streamType: "test", events: [{ ...event(2), eventId }] };
    await appendToStream(db.pool, stored.streamId, "test", stored.events, "no_stream");
    const fresh = newStream(3);
    // When they are appended again along with a new stream
    const outcomes = await appendToNewStreams(db.pool, [{ ...existing, events: [event(9)] }, { ...stored, streamId: `test-${randomUUID()}` }, fresh]);
    // Then only the new stream is written; the others are told apart as appendToStream tells them
    expect(outcomes).toEqual(["stream_exists", "already_appended", "appended"]);
    expect((await readStream(db.pool, existing.streamId)).events.map((e) => e.data)).toEqual([{ n: 1 }]);
    expect((await readStream(db.pool, fresh.streamId)).events.map((e) => e.data)).toEqual([{ n: 3 }]);
    const copies = await db.pool.query("SELECT 1 FROM es_events WHERE event_id = $1", [eventId]);
    expect(copies.rowCount).toBe(1);
    expect(await chainFindings([existing.streamId, stored.streamId, fresh.streamId])).toEqual([]);
  });

  it("lets exactly one of two concurrent creations of a stream win, and the loser's transaction goes on", async () => {
    // Given two transactions that both append a stream s, each with another stream of its own
    const contested = newStream(1);
    const first = newStream(2);
    const second = newStream(3);
    // When they run at the same time (the second waits on the first's uncommitted stream row)
    const results = await Promise.all(
      [first, second].map((own, i) =>
        withTransaction(db.pool, async (client) => {
          const outcomes = await appendToNewStreams(client, [{ ...contested, events: [event(10 + i)] }, own]);
          await new Promise((resolve) => setTimeout(resolve, 50));
          return outcomes;
        }),
      ),
    );
    // Then one created s, the other found it there, and both committed their own stream
    expect(results.map((r) => r[0]).sort()).toEqual(["appended", "stream_exists"]);
    expect(results.map((r) => r[1])).toEqual(["appended", "appended"]);
    expect((await readStream(db.pool, contested.streamId)).events).toHaveLength(1);
    expect(await chainFindings([contested.streamId, first.streamId, second.streamId])).toEqual([]);
  });

  it("refuses a stream named twice or without events and writes nothing; sends nothing for no stream", async () => {
    // Given a call naming one stream twice, and one with a stream without events
    const twice = newStream(1);
    const other = newStream(2);
    // When they are appended
    await expect(appendToNewStreams(db.pool, [twice, other, { ...twice, events: [event(3)] }])).rejects.toThrow(/twice/);
    await expect(appendToNewStreams(db.pool, [other, { ...newStream(), events: [] }])).rejects.toThrow(/at least one event/);
    // Then nothing was written
    expect((await readStream(db.pool, twice.streamId)).version).toBe(0);
    expect((await readStream(db.pool, other.streamId)).version).toBe(0);
    // And an empty call costs no statement
    const counted = counting(db.pool);
    expect(await appendToNewStreams(counted, [])).toEqual([]);
    expect(counted.sent).toBe(0);
  });

  it("writes nothing when the caller's transaction rolls back", async () => {
    // Given streams appended in a transaction
    const appends = [newStream(1), newStream(2)];
    // When the transaction fails after the append
    await expect(
      withTransaction(db.pool, async (client) => {
        expect(await appendToNewStreams(client, appends)).toEqual(["appended", "appended"]);
        throw new Error("the caller fails");
      }),
    ).rejects.toThrow("the caller fails");
    // Then no stream exists, and they can be appended afterwards
    for (const append of appends) expect((await readStream(db.pool, append.streamId)).version).toBe(0);
    expect(await appendToNewStreams(db.pool, appends)).toEqual(["appended", "appended"]);
  });
});
