import type { Pool } from "../../src/db/createPool.ts";
import { AUDIT_CHECKPOINT_STREAM, writeAuditCheckpoints } from "../../src/ledger/audit/auditCheckpoint.ts";
import { eventHash } from "../../src/ledger/eventStore/eventHash.ts";
import { allProjections } from "../../projections/allProjections.ts";
import { rebuildProjections } from "../../projections/rebuildProjections.ts";
import { operatorEdit } from "../support/operatorEdit.ts";
import { uncoveredEvents } from "./auditFixtures.ts";

/**
 * What an operator with write access to the database (and without the signing key) can do to hide a
 * change: edit one event, recompute its hash and every later hash of its stream and the stream's head.
 */
export async function rewriteEventAndChain(pool: Pool, streamId: string, version: number, edit: (data: Record<string, unknown>) => void): Promise<void> {
  await operatorEdit(pool, async (c) => {
    const rows = await c.query<{
      stream_version: string;
      event_id: string;
      event_type: string;
      schema_version: number;
      data: Record<string, unknown>;
      metadata: Record<string, unknown>;
      recorded_at: string;
      hash: string;
    }>(
      `SELECT stream_version, event_id, event_type, schema_version, data, metadata, encode(hash, 'hex') AS hash,
              to_char(recorded_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS recorded_at
         FROM es_events WHERE stream_id = $1 ORDER BY stream_version`,
      [streamId],
    );
    let prev: string | null = null;
    for (const row of rows.rows) {
      const v = Number(row.stream_version);
      if (v < version) {
        prev = row.hash;
        continue;
      }
      if (v === version) edit(row.data);
      const hash = eventHash({
        prevHash: prev,
        streamId,
        streamVersion: v,
        eventId: row.event_id,
        type: row.event_type,
        schemaVersion: row.schema_version,
        data: row.data,
        metadata: row.metadata,
        recordedAt: row.recorded_at,
      });
      await c.query("UPDATE es_events SET data = $3, prev_hash = decode($4, 'hex'), hash = decode($5, 'hex') WHERE stream_id = $1 AND stream_version = $2", [
        streamId,
        v,
        row.data,
        prev,
        hash,
      ]);
      prev = hash;
    }
    await c.query("UPDATE es_streams SET head_hash = decode($2, 'hex') WHERE stream_id = $1", [streamId, prev]);
  });
}

/** Removes a whole stream: its events and its stream row. */
export async function deleteStream(pool: Pool, streamId: string): Promise<void> {
  await operatorEdit(pool, async (c) => {
    await c.query("DELETE FROM es_events WHERE stream_id = $1", [streamId]);
    await c.query("DELETE FROM es_streams WHERE stream_id = $1", [streamId]);
  });
}

/**
 * Then hides the change from the log's own checks: removes every checkpoint and writes them again
 * (unsigned: the operator has no key), and rebuilds the read models from the edited log.
 */
export async function recomputeCheckpointsAndReadModels(pool: Pool): Promise<void> {
  await operatorEdit(pool, async (c) => {
    await c.query("DELETE FROM es_events WHERE stream_id = $1", [AUDIT_CHECKPOINT_STREAM]);
    await c.query("DELETE FROM es_streams WHERE stream_id = $1", [AUDIT_CHECKPOINT_STREAM]);
  });
  for (let i = 0; i < 600 && (await uncoveredEvents(pool)) > 0; i++) {
    await writeAuditCheckpoints(pool);
    await new Promise((r) => setTimeout(r, 50));
  }
  await rebuildProjections(pool, allProjections);
}
