import type { Queryable, RecordedEvent } from "../src/ledger/eventStore/types.ts";
import type { UsageColumns } from "./usageRecordedFrom.ts";

/**
 * A read model built by the projector from the event log. `apply` runs inside the runner's transaction,
 * together with the checkpoint write, and must use unqualified table names (replay rebuilds the tables
 * in a scratch schema by putting it first on the search_path).
 */
export type Projection = {
  /** Checkpoint name (es_checkpoints.projection); never rename a live projection. */
  name: string;
  /** The tables it writes, all rebuilt by `npm run replay`. */
  tables: string[];
  /**
   * Applies a batch of consecutive events (in log order); ignores types it does not handle. Every event
   * is in exactly one batch; the result must not depend on how the log is cut into batches. `usage`:
   * usageColumns(events), from a caller that hands one batch to several projections (parsed once).
   */
  apply(db: Queryable, events: RecordedEvent[], usage?: UsageColumns | null): Promise<void>;
};
