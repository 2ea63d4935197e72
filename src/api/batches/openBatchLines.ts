import type { Pool } from "../../db/createPool.ts";
import { withTransaction } from "../../db/withTransaction.ts";
import type { ModelRegistry } from "../../models/modelRegistry.ts";
import { modelLabel } from "./modelLabel.ts";
import type { BatchLineCounts } from "../../observability/scrapeSources.ts";

/**
 * The open lines of every batch by model and state, for the `batch_lines` gauge. Reads only lines not
 * ended (the partial index batch_lines_open), so a scrape's cost is bounded by the lines still to run,
 * never by the history; a statement timeout bounds it further. Models the registry does not have are
 * counted together as `unknown` (modelLabel).
 */
export async function readOpenBatchLines(pool: Pool, registry: Pick<ModelRegistry, "get">): Promise<BatchLineCounts[]> {
  const rows = await withTransaction(pool, async (client) => {
    await client.query("SET LOCAL statement_timeout = 1000");
    const rows = await client.query<BatchLineCounts>(
      `SELECT model, count(*) FILTER (WHERE status = 'waiting')::int AS waiting, count(*) FILTER (WHERE status = 'running')::int AS running
       FROM batch_lines WHERE status IN ('waiting', 'running') GROUP BY model`,
    );
    return rows.rows;
  });
  const byLabel = new Map<string, BatchLineCounts>();
  for (const row of rows) {
    const model = modelLabel(registry, row.model);
    const counts = byLabel.get(model) ?? { model, waiting: 0, running: 0 };
    counts.waiting += row.waiting;
    counts.running += row.running;
    byLabel.set(model, counts);
  }
  return [...byLabel.values()];
}
