import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LOG_START, positionOf, readAll, readAllInSnapshot, type LogPosition, type RecordedEvent } from "../../src/ledger/eventStore/index.ts";
import type { Queryable } from "../../src/ledger/eventStore/types.ts";
import { ensureServerTransactionIdsPast, insertEventsAt } from "../support/logAtTransactionIds.ts";
import { operatorEdit } from "../support/operatorEdit.ts";
import { createTestDatabase, type TestDatabase } from "../support/testDatabase.ts";

/**
 * The log is ordered by (transaction_id, global_position) as numbers. Transaction ids are server-wide
 * and cross every power of ten in a production database's life; these tests give events explicit ids on
 * both sides of 9,999 / 10,000 and 99,999 / 100,000 and read them back in batches of every size.
 */
let db: TestDatabase;
const HIGHEST_ID = 200_000;
beforeAll(async () => {
  db = await createTestDatabase();
  await ensureServerTransactionIdsPast(db.pool, HIGHEST_ID);
});
afterAll(async () => {
  await db.drop();
});

type Reader = (db: Queryable, after: LogPosition, limit: number) => Promise<RecordedEvent[]>;
const readers: [string, Reader][] = [
  ["readAll", readAll],
  ["readAllInSnapshot", readAllInSnapshot],
];

async function readEverything(read: Reader, batchSize: number): Promise<RecordedEvent[]> {
  const seen: RecordedEvent[] = [];
  let position = LOG_START;
  for (let batch = await read(db.pool, position, batchSize); batch.length; batch = await read(db.pool, position, batchSize)) {
    expect(batch.length).toBeLessThanOrEqual(batchSize);
    seen.push(...batch);
    position = positionOf(batch.at(-1)!);
  }
  return seen;
}

/** The stored events in log order, computed in JavaScript with BigInt (independent of SQL ordering). */
async function storedInNumericOrder(): Promise<{ eventId: string; transactionId: string }[]> {
  const rows = await db.pool.query<{ event_id: string; tx: string; gp: string }>(
    "SELECT event_id, transaction_id::text AS tx, global_position::text AS gp FROM es_events",
  );
  return rows.rows
    .map((r) => ({ eventId: r.event_id, transactionId: r.tx, key: [BigInt(r.tx), BigInt(r.gp)] as const }))
    .sort((a, b) => (a.key[0] !== b.key[0] ? (a.key[0] < b.key[0] ? -1 : 1) : a.key[1] < b.key[1] ? -1 : a.key[1] > b.key[1] ? 1 : 0))
    .map(({ eventId, transactionId }) => ({ eventId, transactionId }));
}

async function resetLog(): Promise<void> {
  await operatorEdit(db.pool, (client) => client.query("TRUNCATE es_events, es_streams"));
}

describe("reading the log across transaction ids 9,999 / 10,000 and 99,999 / 100,000", () => {
  // Written in an order unlike the ids' (commit order is not transaction-id order), several events per id.
  const ids = [100_000n, 9_999n, 5n, 10_000n, 99_999n, 10_001n, 100_000n, 9_998n, 10_000n, 99_998n, 100_001n, 9_999n, 100_000n, 1_000n];

  for (const [name, read] of readers) {
    it(`${name} returns every event once, in numeric order, in batches of every size from 1 up`, async () => {
      await resetLog();
      await insertEventsAt(
        db.pool,
        ids.map((transactionId) => ({ transactionId, type: "Boundary", data: {} })),
      );
      const expected = await storedInNumericOrder();
      expect(expected.map((e) => e.transactionId).slice(0, 4)).toEqual(["5", "1000", "9998", "9999"]);
      for (let batchSize = 1; batchSize <= ids.length + 1; batchSize++) {
        const seen = await readEverything(read, batchSize);
        expect(
          seen.map((e) => ({ eventId: e.eventId, transactionId: e.transactionId })),
          `batch size ${batchSize}`,
        ).toEqual(expected);
      }
    });
  }

  it("a property: any transaction ids (around powers of ten or anywhere) and any batch size read back once each, in order", async () => {
    const boundaryId = fc.constantFrom(9, 10, 99, 100, 999, 1_000, 9_999, 10_000, 99_999, 100_000, 100_001);
    const anyId = fc.oneof(boundaryId, fc.integer({ min: 1, max: HIGHEST_ID }));
    await fc.assert(
      fc.asyncProperty(
        fc.array(anyId, { minLength: 0, maxLength: 30 }),
        fc.integer({ min: 1, max: 12 }),
        fc.constantFrom(...readers),
        async (txIds, batchSize, [, read]) => {
          await resetLog();
          await insertEventsAt(
            db.pool,
            txIds.map((id) => ({ transactionId: BigInt(id), type: "Random", data: {} })),
          );
          const seen = await readEverything(read, batchSize);
          expect(seen.map((e) => ({ eventId: e.eventId, transactionId: e.transactionId }))).toEqual(await storedInNumericOrder());
        },
      ),
      { numRuns: 60 },
    );
  });
});
