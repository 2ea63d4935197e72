import type { Pool } from "../../db/createPool.ts";
import { releaseHolds } from "../../ledger/budget/releaseHold.ts";
import type { PlatformMetrics } from "../../observability/metrics.ts";
import type { InferenceServices } from "../inference/inferenceServices.ts";
import { endIdleLines, runningLinesOf } from "./batchLineRows.ts";
import { modelLabel } from "./modelLabel.ts";

/** Waiting lines of an ending batch ended per statement (each within the API pool's statement timeout). */
const END_LINES_PER_STATEMENT = 2000;

/** The batches that end (cancelled, or their window over), as every dispatcher's round sees them. */
export class EndingBatches {
  readonly #pool: Pool;
  readonly #inference: Pick<InferenceServices, "queues" | "registry">;
  readonly #metrics: Pick<PlatformMetrics, "batches">;
  /** Jobs of ending batches' lines run by a stopped dispatcher, told to stop (#stopJobsRunElsewhere). */
  readonly #stoppedElsewhere = new Set<string>();

  constructor(pool: Pool, inference: Pick<InferenceServices, "queues" | "registry">, metrics: Pick<PlatformMetrics, "batches">) {
    this.#pool = pool;
    this.#inference = inference;
    this.#metrics = metrics;
  }

  /**
   * Lines not started of expired and cancelling batches: the error file, not run, not charged. The jobs of
   * their running lines no dispatcher of this process runs (`runsHere`) are told to stop.
   */
  async endWaitingLines(runsHere: (batchId: string, lineNo: number) => boolean): Promise<void> {
    // Only a batch with lines still to end expires: one whose lines all ended in time completes, even when
    // the tick that finalizes it comes after its window.
    await this.#pool.query(
      `UPDATE batches b SET final_status = 'expired' WHERE status = 'in_progress' AND final_status IS NULL AND expires_at <= now()
         AND EXISTS (SELECT 1 FROM batch_lines l WHERE l.batch_id = b.id AND l.status IN ('waiting', 'running'))`,
    );
    const ending = await this.#pool.query<{ id: string; status: string }>(
      "SELECT id, status FROM batches WHERE status = 'cancelling' OR (status = 'in_progress' AND final_status = 'expired')",
    );
    for (const batch of ending.rows) {
      const error =
        batch.status === "cancelling"
          ? { code: "batch_cancelled", message: "This request was not run: the batch was cancelled." }
          : { code: "batch_expired", message: "This request could not be executed before the completion window expired." };
      const outcome = batch.status === "cancelling" ? "cancelled" : "expired";
      for (;;) {
        const ended = await endIdleLines(this.#pool, batch.id, error, END_LINES_PER_STATEMENT);
        for (const { model, n } of ended) this.#metrics.batches.linesEnded.inc({ model: modelLabel(this.#inference.registry, model), outcome }, n);
        // A line that waited to run again after a run that failed for the platform's reason (which charged
        // nothing) still holds its budget hold: it ends here without a run to settle it.
        await releaseHolds(
          this.#pool,
          ended.flatMap((row) => row.completion_ids),
        );
        if (ended.reduce((sum, row) => sum + row.n, 0) < END_LINES_PER_STATEMENT) break;
      }
      await this.#stopJobsRunElsewhere(batch.id, runsHere);
    }
  }

  /**
   * The jobs of an ending batch's running lines that no dispatcher here runs (their process stopped or was
   * killed: their leases have not run out yet) are told to stop now, charging nothing, as their dispatcher
   * would have; each line ends once its lease ran out (claimLinesToSettle), from what its job did. Once
   * per job (a dispatcher alive elsewhere sends the same cancel).
   */
  async #stopJobsRunElsewhere(batchId: string, runsHere: (batchId: string, lineNo: number) => boolean): Promise<void> {
    for (const line of await runningLinesOf(this.#pool, batchId)) {
      if (runsHere(batchId, line.line_no) || this.#stoppedElsewhere.has(line.completion_id)) continue;
      this.#stoppedElsewhere.add(line.completion_id);
      await this.#inference.queues.cancel(line.model, line.completion_id, "expired").catch(() => this.#stoppedElsewhere.delete(line.completion_id));
    }
    // Bounded: forgotten once many accumulated (a job told twice changes nothing).
    if (this.#stoppedElsewhere.size > 100_000) this.#stoppedElsewhere.clear();
  }
}
