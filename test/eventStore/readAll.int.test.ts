import { randomBytes, randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { withTransaction } from "../../src/db/withTransaction.ts";
import { appendToStream, LOG_START, positionOf, readAll, readAllInSnapshot, type LogPosition, type RecordedEvent } from "../../src/ledger/eventStore/index.ts";
import { eventually } from "../support/eventually.ts";
import { createTestDatabase, type TestDatabase } from "../support/testDatabase.ts";

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});

describe("readAll (gap-safe global reader)", () => {
  it("does not return events of a transaction still in flight, nor skip them once it commits", async () => {
    const stream = `slow-${randomUUID()}`;
    let releaseSlow!: () => void;
    const slowCanCommit = new Promise<void>((r) => (releaseSlow = r));
    let slowAppended!: () => void;
    const slowHasAppended = new Promise<void>((r) => (slowAppended = r));
    const slow = withTransaction(db.pool, async (client) => {
      await appendToStream(client, stream, "test", [{ type: "Slow", data: {} }], "no_stream");
      slowAppended();
      await slowCanCommit;
    });
    await slowHasAppended;
    // A later, fast transaction commits while the slow one is still open.
    await appendToStream(db.pool, `fast-${randomUUID()}`, "test", [{ type: "Fast", data: {} }], "no_stream");
    const whileOpen = await readAll(db.pool, LOG_START);
    expect(whileOpen.map((e) => e.type)).not.toContain("Fast");
    expect(whileOpen.map((e) => e.type)).not.toContain("Slow");
    releaseSlow();
    await slow;
    // Both become readable once every older transaction has ended. Transaction ids are server-wide, so
    // a transaction another test file (another database) holds open delays them too: poll until they show.
    const after = await eventually(async () => {
      const events = await readAll(db.pool, LOG_START);
      return events.some((e) => e.type === "Fast") ? events : undefined;
    });
    expect(after.map((e) => e.type)).toEqual(["Slow", "Fast"]);
  });

  it("reads every event exactly once, in commit-safe order, while 20 writers append (one held open for a second)", async () => {
    const prefix = `w-${randomUUID()}`;
    const seen: RecordedEvent[] = [];
    let position: LogPosition = LOG_START;
    // Skip what earlier tests wrote.
    for (let batch = await readAll(db.pool, position); batch.length; batch = await readAll(db.pool, position)) {
      position = positionOf(batch.at(-1)!);
    }
    // The reader stops once it has seen all 100 events, or 20 s after the writers finished (events
    // can stay unreadable after their commit while an older transaction, even in another database,
    // is still open); then one more read must bring nothing of ours (no event twice).
    let writersDoneAt: number | null = null;
    const mineSeen = () => seen.filter((e) => e.streamId.startsWith(prefix)).length;
    const reader = (async () => {
      while (mineSeen() < 100 && (writersDoneAt === null || Date.now() - writersDoneAt < 20_000)) {
        const batch = await readAll(db.pool, position, 7);
        for (const e of batch) {
          seen.push(e);
          position = positionOf(e);
        }
        if (batch.length === 0) await new Promise((r) => setTimeout(r, 5));
      }
      const tail = await readAll(db.pool, position);
      seen.push(...tail.filter((e) => e.streamId.startsWith(prefix)));
    })();
    const writers = Array.from({ length: 20 }, (_, w) =>
      withTransaction(db.pool, async (client) => {
        for (let i = 0; i < 5; i++) {
          await appendToStream(client, `${prefix}-${w}`, "test", [{ type: "Written", data: { w, i } }], i);
          if (w === 0 && i === 0) await new Promise((r) => setTimeout(r, 1000));
        }
      }),
    );
    await Promise.all(writers);
    writersDoneAt = Date.now();
    await reader;

    const mine = seen.filter((e) => e.streamId.startsWith(prefix));
    expect(mine).toHaveLength(100);
    expect(new Set(mine.map((e) => e.eventId)).size).toBe(100);
    // Order is (transaction id, global position) ascending, and each stream's events come in version order.
    for (let i = 1; i < seen.length; i++) {
      const a = seen[i - 1]!;
      const b = seen[i]!;
      const ordered =
        BigInt(a.transactionId) < BigInt(b.transactionId) || (a.transactionId === b.transactionId && BigInt(a.globalPosition) < BigInt(b.globalPosition));
      expect(ordered).toBe(true);
    }
    for (let w = 0; w < 20; w++) {
      expect(mine.filter((e) => e.streamId === `${prefix}-${w}`).map((e) => e.streamVersion)).toEqual([1, 2, 3, 4, 5]);
    }
  });

  it("cuts a batch of large events at the byte budget, and still returns an event larger than the budget", async () => {
    let position: LogPosition = LOG_START;
    for (let batch = await readAllInSnapshot(db.pool, position, 500); batch.length; batch = await readAllInSnapshot(db.pool, position, 500)) {
      position = positionOf(batch.at(-1)!);
    }
    const stream = `large-${randomUUID()}`;
    // About 2,000 stored bytes each (random hex does not compress much).
    const events = Array.from({ length: 10 }, (_, i) => ({ type: "Large", data: { i, blob: randomBytes(1000).toString("hex") } }));
    await appendToStream(db.pool, stream, "test", events, "no_stream");
    const read = async (maxBytes: number) => {
      const batches: number[] = [];
      const seen: number[] = [];
      for (let after = position; ; ) {
        const batch = (await readAllInSnapshot(db.pool, after, 100, maxBytes)).filter((e) => e.streamId === stream);
        if (batch.length === 0) return { batches, seen };
        batches.push(batch.length);
        seen.push(...batch.map((e) => e.streamVersion));
        after = positionOf(batch.at(-1)!);
      }
    };
    const budgeted = await read(5000);
    expect(budgeted.seen).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(Math.max(...budgeted.batches)).toBeLessThanOrEqual(4);
    expect(budgeted.batches.length).toBeGreaterThanOrEqual(3);
    const tiny = await read(10);
    expect(tiny.batches).toEqual(Array(10).fill(1));
    expect(tiny.seen).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
  });
});
