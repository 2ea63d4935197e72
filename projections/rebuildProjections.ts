import pg from "pg";
import type { Pool, PoolClient } from "../src/db/createPool.ts";
import { withTransaction } from "../src/db/withTransaction.ts";
import { compareLogPositions, LOG_START, positionOf, type LogPosition } from "../src/ledger/eventStore/logPosition.ts";
import { readAll } from "../src/ledger/eventStore/readAll.ts";
import type { RecordedEvent } from "../src/ledger/eventStore/types.ts";
import { advanceCheckpoint, readCheckpoint } from "./checkpoint.ts";
import type { Projection } from "./projection.ts";
import { PROJECTION_LOCK_SPACE } from "./projectionLocks.ts";
import { projectNextBatch } from "./projectNextBatch.ts";
import { readAhead } from "./readAhead.ts";
import { usageColumns } from "./usageRecordedFrom.ts";

export type RebuildResult = { projection: string; eventsApplied: number; checkpoint: LogPosition };

/** A projection the rebuild's single pass over the log still feeds (`inPass`), and where it stands. */
type Rebuilding = { projection: Projection; at: LogPosition; eventsApplied: number; inPass: boolean };

/**
 * Rebuilds the projected read models from the log: in one transaction, empties each projection's tables
 * and removes its checkpoint (holding the projection's reset lock, so no batch of a running projector
 * interleaves), then projects the log from its start up to the last event committed when it began
 * (waiting, up to a minute, for transactions still open elsewhere on the server, before which the log's
 * reader stops).
 *
 * The log is read once for all projections (readAll, the projector's gap-safe reader, on a second
 * connection, one batch ahead: the next batch is read while the current one is applied). Each batch is
 * applied to every projection in one transaction that moves each projection's own checkpoint with
 * compare-and-set, as the projector does. Safe while projectors (or another rebuild) run: a projection
 * whose checkpoint is no longer where this pass left it (someone else applied a batch) or whose
 * compare-and-set loses a race is rolled back to its savepoint and leaves the pass; it then catches up
 * from its checkpoint one batch at a time (projectNextBatch), so no event is applied twice. The read
 * models show less than the log until the catch-up ends. The pool needs two free connections.
 */
export async function rebuildProjections(
  pool: Pool,
  projections: Projection[],
  batchSize = 1000,
  options: { catchUpWithinMs?: number } = {},
): Promise<RebuildResult[]> {
  // The last event committed now: the rebuild goes at least that far. The log's reader stops before any
  // transaction still open on the server (other databases' too), so it may have to wait for one to end.
  const target = await lastLogPosition(pool);
  await withTransaction(pool, async (client) => {
    for (const p of projections) {
      await client.query("SELECT pg_advisory_xact_lock($1, hashtext($2))", [PROJECTION_LOCK_SPACE.reset, p.name]);
    }
    for (const table of projections.flatMap((p) => p.tables)) await client.query(`DELETE FROM ${pg.escapeIdentifier(table)}`);
    await client.query("DELETE FROM es_checkpoints WHERE projection = ANY($1::text[])", [projections.map((p) => p.name)]);
  });
  const client = await pool.connect();
  try {
    const rebuilding: Rebuilding[] = projections.map((projection) => ({ projection, at: LOG_START, eventsApplied: 0, inPass: true }));
    const reader = await pool.connect();
    try {
      for await (const events of readAhead((after) => readAll(reader, after, batchSize), LOG_START, { rereadEmpty: true })) {
        const inPass = rebuilding.filter((r) => r.inPass);
        if (inPass.length === 0) break;
        await applyToEach(client, inPass, events);
      }
    } finally {
      reader.release();
    }
    for (const r of rebuilding.filter((r) => !r.inPass)) {
      for (let applied = 1; applied > 0; r.eventsApplied += applied) applied = await projectNextBatch(client, r.projection, batchSize);
    }
    await catchUp(client, rebuilding, target, batchSize, Date.now() + (options.catchUpWithinMs ?? CATCH_UP_WITHIN_MS));
    const results: RebuildResult[] = [];
    for (const r of rebuilding) {
      results.push({ projection: r.projection.name, eventsApplied: r.eventsApplied, checkpoint: await readCheckpoint(client, r.projection.name) });
    }
    return results;
  } finally {
    client.release();
  }
}

/** How long a rebuild waits for transactions still open elsewhere on the server before it returns short of the log's end. */
const CATCH_UP_WITHIN_MS = 60_000;

/** The log position of the last event committed (visible) now, or null for an empty log. */
async function lastLogPosition(pool: Pool): Promise<LogPosition | null> {
  const last = await pool.query<{ transaction_id: string; global_position: string }>(
    "SELECT transaction_id::text, global_position::text FROM es_events ORDER BY transaction_id DESC, global_position DESC LIMIT 1",
  );
  const row = last.rows[0];
  return row ? { transactionId: row.transaction_id, globalPosition: row.global_position } : null;
}

/**
 * Projects on, one batch at a time, until every projection's checkpoint has reached `target` (the log's
 * end when the rebuild began), or the deadline: the pass ends where the log's reader stopped, before a
 * transaction still open anywhere on the server (an operator's `npm run replay -- --rebuild` would
 * otherwise report differences that are only the lag).
 */
async function catchUp(client: PoolClient, rebuilding: Rebuilding[], target: LogPosition | null, batchSize: number, deadline: number): Promise<void> {
  if (target === null) return;
  for (const r of rebuilding) {
    while (compareLogPositions(await readCheckpoint(client, r.projection.name), target) < 0 && Date.now() < deadline) {
      const applied = await projectNextBatch(client, r.projection, batchSize);
      r.eventsApplied += applied;
      if (applied === 0) await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

/**
 * Applies one batch to each projection still in the pass, in one transaction, each under the reset lock
 * (shared, as a projector's batch) and its own savepoint, moving its checkpoint from where the pass left
 * it to the batch's last event. A projection whose checkpoint moved elsewhere leaves the pass unchanged.
 */
async function applyToEach(client: PoolClient, inPass: Rebuilding[], events: RecordedEvent[]): Promise<void> {
  const end = positionOf(events.at(-1)!);
  const applied: Rebuilding[] = [];
  const usage = usageColumns(events);
  await client.query("BEGIN");
  try {
    for (const r of inPass) {
      const name = r.projection.name;
      await client.query("SELECT pg_advisory_xact_lock_shared($1, hashtext($2))", [PROJECTION_LOCK_SPACE.reset, name]);
      if (compareLogPositions(await readCheckpoint(client, name), r.at) !== 0) {
        r.inPass = false;
        continue;
      }
      await client.query("SAVEPOINT rebuild_projection");
      await r.projection.apply(client, events, usage);
      if (await advanceCheckpoint(client, name, r.at, end)) {
        applied.push(r);
      } else {
        await client.query("ROLLBACK TO SAVEPOINT rebuild_projection");
        r.inPass = false;
      }
    }
    await client.query("COMMIT");
  } catch (error) {
    await client.query("ROLLBACK").catch(() => undefined);
    throw error;
  }
  for (const r of applied) {
    r.at = end;
    r.eventsApplied += events.length;
  }
}
