import type { Queryable, RecordedEvent } from "../src/ledger/eventStore/types.ts";

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
  /** Applies one event; ignores types it does not handle. Called exactly once per event, in log order. */
  apply(db: Queryable, event: RecordedEvent): Promise<void>;
};
