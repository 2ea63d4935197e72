import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { allProjections } from "../../projections/allProjections.ts";
import { rebuildProjections } from "../../projections/rebuildProjections.ts";
import { UsageRecorder } from "../../workers/completion/usageRecorder.ts";
import { createTestDatabase, type TestDatabase } from "../support/testDatabase.ts";
import { usageEvent } from "../usage/usageFixtures.ts";

/**
 * The log's reader stops before any transaction still open on the server (other databases' too, whose
 * ids bound the snapshot's xmin): a rebuild that began while one was open went only that far and
 * returned short of the log's end (a test compared an empty read model after it; `npm run replay --
 * --rebuild` would report the lag as differences). It waits for the log's end as it was when it began.
 */
let db: TestDatabase;
let other: TestDatabase;
beforeAll(async () => {
  [db, other] = await Promise.all([createTestDatabase(), createTestDatabase()]);
});
afterAll(async () => {
  await Promise.all([db?.drop(), other?.drop()]);
});

describe("a rebuild while a transaction is open elsewhere on the server", () => {
  it("projects every event committed before it began, once the open transaction ends", async () => {
    // A transaction of another database, holding a transaction id older than the events below.
    const open = await other.pool.connect();
    await open.query("BEGIN");
    await open.query("SELECT pg_current_xact_id()");
    const accountId = randomUUID();
    const recorder = new UsageRecorder(db.pool);
    for (let i = 0; i < 3; i++) {
      await recorder.record(usageEvent({ accountId, completionId: randomUUID(), promptTokens: 10, completionTokens: 5, costMicroChf: 100 }).data, {});
    }
    let ended = false;
    const closing = new Promise<void>((resolve) =>
      setTimeout(() => {
        ended = true;
        void open.query("COMMIT").finally(() => {
          open.release();
          resolve();
        });
      }, 500),
    );
    await rebuildProjections(db.pool, allProjections);
    expect(ended).toBe(true);
    await closing;
    const rows = await db.pool.query<{ requests: string; cost: string }>(
      "SELECT sum(requests)::text AS requests, sum(cost_micro_chf)::text AS cost FROM rm_account_usage_daily WHERE account_id = $1",
      [accountId],
    );
    expect(rows.rows[0]).toEqual({ requests: "3", cost: "300" });
  });
});
