import type { Worker } from "bullmq";

/**
 * Keeps the BullMQ locks of the jobs a CompletionWorker runs: every half lock duration, one
 * `extendJobLocks` call (one Lua script) for all of them. A job whose lock runs out is taken for
 * stalled by BullMQ's stalled check and failed (maxStalledCount 0) while it still runs, so a generation
 * longer than the lock duration needs this. `onLost` hears of jobs whose lock could not be extended
 * (it was lost: the job is no longer this worker's in BullMQ's eyes).
 */
export class JobLocks {
  readonly #worker: Pick<Worker, "extendJobLocks">;
  readonly #durationMs: number;
  readonly #onLost: (jobIds: string[]) => void;
  /** job id -> lock token */
  readonly #tokens = new Map<string, string>();
  #timer: NodeJS.Timeout | null = null;

  constructor(worker: Pick<Worker, "extendJobLocks">, durationMs: number, onLost: (jobIds: string[]) => void) {
    this.#worker = worker;
    this.#durationMs = durationMs;
    this.#onLost = onLost;
  }

  start(): void {
    this.#timer ??= setInterval(() => void this.#extend(), this.#durationMs / 2);
    this.#timer.unref();
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
  }

  track(jobId: string, token: string): void {
    this.#tokens.set(jobId, token);
  }

  untrack(jobId: string): void {
    this.#tokens.delete(jobId);
  }

  async #extend(): Promise<void> {
    if (this.#tokens.size === 0) return;
    const jobIds = [...this.#tokens.keys()];
    const tokens = jobIds.map((id) => this.#tokens.get(id)!);
    try {
      const lost = await this.#worker.extendJobLocks(jobIds, tokens, this.#durationMs);
      // A job that finished while the call was on its way has no lock any more: not lost.
      const stillRunning = lost.filter((id) => this.#tokens.has(id));
      if (stillRunning.length > 0) this.#onLost(stillRunning);
    } catch {
      // Redis unreachable: the next round tries again, well within the lock's duration.
    }
  }
}
