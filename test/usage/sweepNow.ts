import type { Pool } from "../../src/db/createPool.ts";
import { HoldSweeper } from "../../src/ledger/budget/holdSweeper.ts";
import { silentLogger } from "../../src/observability/logger.ts";

/** One pass of the projector's sweeper now (folds, releases holds older than an hour, refunds undelivered replies). */
export function sweepNow(pool: Pool): Promise<number> {
  return new HoldSweeper({ pool, clock: { now: () => new Date() }, logger: silentLogger, maxHoldAgeMs: 3_600_000, intervalMs: 0 }).sweepOnce();
}
