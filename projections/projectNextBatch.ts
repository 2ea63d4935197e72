import type { PoolClient } from "../src/db/createPool.ts";
import { positionOf } from "../src/ledger/eventStore/logPosition.ts";
import { readAll } from "../src/ledger/eventStore/readAll.ts";
import { advanceCheckpoint, readCheckpoint } from "./checkpoint.ts";
import type { Projection } from "./projection.ts";
import { PROJECTION_LOCK_SPACE } from "./projectionLocks.ts";

/**
 * Applies at most one batch of new events to the projection on `client`, in one transaction with the
 * checkpoint's compare-and-set. Returns the number of events applied (0: caught up, or another instance
 * got there first and this batch was rolled back, so no event is ever applied twice).
 */
export async function projectNextBatch(client: PoolClient, projection: Projection, batchSize: number): Promise<number> {
  await client.query("BEGIN");
  try {
    await client.query("SELECT pg_advisory_xact_lock_shared($1, hashtext($2))", [PROJECTION_LOCK_SPACE.reset, projection.name]);
    const from = await readCheckpoint(client, projection.name);
    const events = await readAll(client, from, batchSize);
    if (events.length === 0) {
      await client.query("COMMIT");
      return 0;
    }
    await projection.apply(client, events);
    if (!(await advanceCheckpoint(client, projection.name, from, positionOf(events.at(-1)!)))) {
      await client.query("ROLLBACK");
      return 0;
    }
    await client.query("COMMIT");
    return events.length;
  } catch (error) {
    await client.query("ROLLBACK").catch(() => undefined);
    throw error;
  }
}
