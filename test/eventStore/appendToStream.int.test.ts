import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { withTransaction } from "../../src/db/withTransaction.ts";
import { appendToStream, ConcurrencyError, readStream } from "../../src/ledger/eventStore/index.ts";
import { eventHash } from "../../src/ledger/eventStore/eventHash.ts";
import { createTestDatabase, type TestDatabase } from "../support/testDatabase.ts";

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});

const event = (n: number) => ({ type: "Counted", data: { n } });

describe("appendToStream", () => {
  it("appends to a new stream and reads the events back in order", async () => {
    const id = `test-${randomUUID()}`;
    const result = await appendToStream(db.pool, id, "test", [event(1), event(2)], "no_stream");
    expect(result).toEqual({ nextVersion: 2, appended: true });
    const read = await readStream(db.pool, id);
    expect(read.version).toBe(2);
    expect(read.events.map((e) => [e.streamVersion, e.type, e.data])).toEqual([
      [1, "Counted", { n: 1 }],
      [2, "Counted", { n: 2 }],
    ]);
  });

  it("refuses an append at a stale expected version and appends nothing", async () => {
    const id = `test-${randomUUID()}`;
    await appendToStream(db.pool, id, "test", [event(1)], "no_stream");
    await expect(appendToStream(db.pool, id, "test", [event(2)], 0)).rejects.toBeInstanceOf(ConcurrencyError);
    await expect(appendToStream(db.pool, id, "test", [event(2)], 2)).rejects.toBeInstanceOf(ConcurrencyError);
    expect((await readStream(db.pool, id)).events).toHaveLength(1);
  });

  it("lets exactly one of two concurrent appends at the same expected version win", async () => {
    const id = `test-${randomUUID()}`;
    await appendToStream(db.pool, id, "test", [event(0)], "no_stream");
    // Both transactions are open at once; the second blocks on the first's row lock, then sees the new version.
    const attempt = (n: number) =>
      withTransaction(db.pool, async (client) => {
        const r = await appendToStream(client, id, "test", [event(n)], 1);
        await new Promise((resolve) => setTimeout(resolve, 50));
        return r;
      });
    const results = await Promise.allSettled([attempt(1), attempt(2)]);
    const won = results.filter((r) => r.status === "fulfilled");
    const lost = results.filter((r) => r.status === "rejected");
    expect(won).toHaveLength(1);
    expect(lost).toHaveLength(1);
    expect((lost[0] as PromiseRejectedResult).reason).toBeInstanceOf(ConcurrencyError);
    const read = await readStream(db.pool, id);
    expect(read.version).toBe(2);
    expect(read.events).toHaveLength(2);
  });

  it("lets exactly one of two concurrent creations of the same stream win", async () => {
    const id = `test-${randomUUID()}`;
    const results = await Promise.allSettled([
      appendToStream(db.pool, id, "test", [event(1)], "no_stream"),
      appendToStream(db.pool, id, "test", [event(2)], "no_stream"),
    ]);
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    expect((await readStream(db.pool, id)).events).toHaveLength(1);
  });

  it("treats re-appending the same event id as a no-op", async () => {
    const id = `test-${randomUUID()}`;
    const eventId = randomUUID();
    const first = await appendToStream(db.pool, id, "test", [{ ...event(1), eventId }], "no_stream");
    const again = await appendToStream(db.pool, id, "test", [{ ...event(1), eventId }], "no_stream");
    expect(first.appended).toBe(true);
    expect(again).toEqual({ nextVersion: 1, appended: false });
    expect((await readStream(db.pool, id)).events).toHaveLength(1);
  });

  it("appends with expected version 'any' whatever the stream holds", async () => {
    const id = `test-${randomUUID()}`;
    await appendToStream(db.pool, id, "test", [event(1)], "any");
    const r = await appendToStream(db.pool, id, "test", [event(2), event(3)], "any");
    expect(r.nextVersion).toBe(3);
  });

  it("stores metadata with each event", async () => {
    const id = `test-${randomUUID()}`;
    await appendToStream(db.pool, id, "test", [{ ...event(1), metadata: { correlationId: "c1", actor: "admin" } }], "no_stream");
    const read = await readStream(db.pool, id);
    expect(read.events[0]!.metadata).toEqual({ correlationId: "c1", actor: "admin" });
  });

  it("chains each event's hash to the previous one of its stream, over what reads back from jsonb", async () => {
    const id = `test-${randomUUID()}`;
    // Keys in an order jsonb changes, numbers it normalises, text it must keep exactly.
    const awkward = { zeta: 1.0, alpha: [1e21, 0.1, -0], "\u00e9": "caf\u00e9 \ud83d\ude00", nested: { b: null, a: "" } };
    await appendToStream(db.pool, id, "test", [{ type: "Odd", data: awkward, metadata: { actor: "t" } }, event(2)], "no_stream");
    await withTransaction(db.pool, (c) => appendToStream(c, id, "test", [event(3)], 2));
    await appendToStream(db.pool, id, "test", [event(4)], "any");
    const rows = await db.pool.query<{
      stream_version: string;
      event_id: string;
      event_type: string;
      schema_version: number;
      data: unknown;
      metadata: unknown;
      recorded_at: Date;
      prev_hash: string | null;
      hash: string;
    }>(
      "SELECT stream_version, event_id, event_type, schema_version, data, metadata, recorded_at, encode(prev_hash, 'hex') AS prev_hash, encode(hash, 'hex') AS hash FROM es_events WHERE stream_id = $1 ORDER BY stream_version",
      [id],
    );
    let prev: string | null = null;
    for (const row of rows.rows) {
      expect(row.prev_hash).toBe(prev);
      const recomputed = eventHash({
        prevHash: prev,
        streamId: id,
        streamVersion: Number(row.stream_version),
        eventId: row.event_id,
        type: row.event_type,
        schemaVersion: row.schema_version,
        data: row.data,
        metadata: row.metadata,
        recordedAt: row.recorded_at.toISOString(),
      });
      expect(row.hash).toBe(recomputed);
      prev = row.hash;
    }
    expect(rows.rows).toHaveLength(4);
    const head = await db.pool.query<{ head: string }>("SELECT encode(head_hash, 'hex') AS head FROM es_streams WHERE stream_id = $1", [id]);
    expect(head.rows[0]!.head).toBe(prev);
  });

  it("keeps one chain under concurrent appends with expected version any", async () => {
    const id = `test-${randomUUID()}`;
    await Promise.all(Array.from({ length: 20 }, (_, n) => withTransaction(db.pool, (c) => appendToStream(c, id, "test", [event(n)], "any"))));
    const rows = await db.pool.query<{ v: string; prev: string | null; hash: string }>(
      "SELECT stream_version AS v, encode(prev_hash, 'hex') AS prev, encode(hash, 'hex') AS hash FROM es_events WHERE stream_id = $1 ORDER BY stream_version",
      [id],
    );
    expect(rows.rows.map((r) => Number(r.v))).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    for (const [i, row] of rows.rows.entries()) expect(row.prev).toBe(i === 0 ? null : rows.rows[i - 1]!.hash);
  });
});
