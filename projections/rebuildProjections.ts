import pg from "pg";
import type { Pool } from "../src/db/createPool.ts";
import { withTransaction } from "../src/db/withTransaction.ts";
import type { LogPosition } from "../src/ledger/eventStore/logPosition.ts";
import { readCheckpoint } from "./checkpoint.ts";
import type { Projection } from "./projection.ts";
import { PROJECTION_LOCK_SPACE } from "./projectionLocks.ts";
import { projectNextBatch } from "./projectNextBatch.ts";

export type RebuildResult = { projection: string; eventsApplied: number; checkpoint: LogPosition };

/**
 * Rebuilds the projected read models from the log: in one transaction, empties each projection's tables
 * and removes its checkpoint (holding the projection's reset lock, so no batch of a running projector
 * interleaves), then projects the log from its start up to what is readable now. Safe while projectors
 * run: they continue from the reset checkpoint, and the checkpoint's compare-and-set keeps any event
 * from being applied twice when they race this catch-up. The read models show less than the log until
 * the catch-up ends.
 */
export async function rebuildProjections(pool: Pool, projections: Projection[], batchSize = 1000): Promise<RebuildResult[]> {
  await withTransaction(pool, async (client) => {
    for (const p of projections) {
      await client.query("SELECT pg_advisory_xact_lock($1, hashtext($2))", [PROJECTION_LOCK_SPACE.reset, p.name]);
    }
    for (const table of projections.flatMap((p) => p.tables)) await client.query(`DELETE FROM ${pg.escapeIdentifier(table)}`);
    await client.query("DELETE FROM es_checkpoints WHERE projection = ANY($1::text[])", [projections.map((p) => p.name)]);
  });
  const client = await pool.connect();
  try {
    const results: RebuildResult[] = [];
    for (const projection of projections) {
      let eventsApplied = 0;
      for (let applied = 1; applied > 0; eventsApplied += applied) applied = await projectNextBatch(client, projection, batchSize);
      results.push({ projection: projection.name, eventsApplied, checkpoint: await readCheckpoint(client, projection.name) });
    }
    return results;
  } finally {
    client.release();
  }
}
