import type { Queryable } from "../src/ledger/eventStore/types.ts";
import type { ProjectionLag } from "../src/observability/scrapeSources.ts";

/** Events behind are counted up to this many (a scrape stays cheap however far a projection is behind). */
const COUNT_CAP = 100_000;

/**
 * How far each projection is behind the event log, read on a metrics scrape: the events after its
 * checkpoint (capped at COUNT_CAP) and the age of the oldest of them (0 when caught up). Events of a
 * transaction still in flight count too: they are what the projection will apply next.
 */
export async function readProjectionLag(db: Queryable, projections: string[]): Promise<ProjectionLag[]> {
  const r = await db.query<{ projection: string; events_behind: string; seconds_behind: string | null }>(
    `SELECT p.name AS projection,
            (SELECT count(*) FROM (
               SELECT 1 FROM es_events e
                WHERE (e.transaction_id, e.global_position) > (COALESCE(c.transaction_id, '0'::xid8), COALESCE(c.global_position, 0))
                LIMIT $2) behind) AS events_behind,
            (SELECT EXTRACT(EPOCH FROM now() - e.recorded_at) FROM es_events e
              WHERE (e.transaction_id, e.global_position) > (COALESCE(c.transaction_id, '0'::xid8), COALESCE(c.global_position, 0))
              ORDER BY e.transaction_id, e.global_position LIMIT 1) AS seconds_behind
       FROM unnest($1::text[]) AS p(name)
       LEFT JOIN es_checkpoints c ON c.projection = p.name`,
    [projections, COUNT_CAP],
  );
  return r.rows.map((row) => ({
    projection: row.projection,
    eventsBehind: Number(row.events_behind),
    secondsBehind: row.seconds_behind === null ? 0 : Math.max(0, Number(row.seconds_behind)),
  }));
}
