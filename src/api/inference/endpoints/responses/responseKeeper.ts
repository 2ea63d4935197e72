import type { LogFields, Logger } from "../../../../observability/logger.ts";
import { throttledWarning } from "../../../../observability/throttledWarning.ts";
import type { CompletionRecords } from "../../jobs/completionRecords.ts";
import { JobReleasedError, type RunningJob } from "../../jobs/runningJob.ts";
import type { ResponseHead } from "./responseObject.ts";
import { ResponseRun } from "./responseRun.ts";
import type { ResponseStore, StoredResponse } from "./responseStore.ts";

export type ResponseKeeperOptions = {
  /** How often the leases of the followed responses are renewed, orphans taken over and expired responses deleted. */
  tickMs: number;
  /** Expired responses are deleted every this many ticks. */
  sweepEveryTicks: number;
};

export const DEFAULT_KEEPER_OPTIONS: ResponseKeeperOptions = { tickMs: 10_000, sweepEveryTicks: 6 };
/** An API process holds a response's lease this long past its last renewal (three ticks). */
export const RESPONSE_LEASE_MS = 30_000;

/**
 * The responses this API process follows to their end, so that each one's result is stored whatever its
 * clients do: the process that created a response follows its job (a background response's nobody
 * waits on, too); every tick it renews their leases, takes over responses whose process stopped (their
 * lease ran out: they are followed again from their replay stream, which the job machinery keeps going
 * through a worker crash) and, now and then, deletes expired responses (RESPONSES_RETENTION_DAYS).
 */
export class ResponseKeeper {
  readonly store: ResponseStore;
  readonly #records: CompletionRecords;
  readonly #follow: (id: string, afterSeq: number, options: { started: true }) => RunningJob;
  readonly #logger: Logger;
  /** At most once per 10 s while ticks keep failing (PostgreSQL away). */
  readonly #tickFailed: (fields?: LogFields) => void;
  readonly #options: ResponseKeeperOptions;
  readonly #runs = new Map<string, ResponseRun>();
  #timer: NodeJS.Timeout | null = null;
  #ticks = 0;
  #ticking: Promise<void> = Promise.resolve();
  #closed = false;

  constructor(deps: {
    store: ResponseStore;
    records: CompletionRecords;
    /** The job's messages from its replay stream after `afterSeq`, its `started` included. */
    follow: (id: string, afterSeq: number, options: { started: true }) => RunningJob;
    logger: Logger;
    options?: ResponseKeeperOptions;
  }) {
    this.store = deps.store;
    this.#records = deps.records;
    this.#follow = deps.follow;
    this.#logger = deps.logger;
    this.#tickFailed = throttledWarning(deps.logger, "responses tick failed");
    this.#options = deps.options ?? DEFAULT_KEEPER_OPTIONS;
  }

  start(): void {
    if (this.#timer || this.#options.tickMs <= 0) return;
    this.#timer = setInterval(() => {
      this.#ticking = this.#ticking.then(() => this.tick()).catch((error: unknown) => this.#tickFailed({ error: error as Error }));
    }, this.#options.tickMs);
    this.#timer.unref();
  }

  /** The run of a response followed here (undefined: none). */
  run(id: string): ResponseRun | undefined {
    return this.#runs.get(id);
  }

  /** Starts following a new response (before its job starts: ResponseRun.follow or fail). `stored`: its result is written. */
  track(head: ResponseHead, stored: boolean): ResponseRun {
    const run = new ResponseRun(head, {
      started: () => (stored ? this.store.started(head.id) : Promise.resolve()),
      ended: async (ended) => {
        this.#runs.delete(head.id);
        if (stored) await this.#finish(head.id, ended);
      },
      continuation: (afterSeq, error) => this.#continuation(head.id, afterSeq, error),
    });
    this.#runs.set(head.id, run);
    return run;
  }

  /** One tick: leases renewed, orphaned responses taken over, and every few ticks the expired ones deleted. */
  async tick(): Promise<void> {
    if (this.#closed) return;
    const now = new Date();
    await this.store.renew([...this.#runs.keys()], now);
    for (const orphan of await this.store.claimOrphans(now, 100)) this.#resume(orphan);
    if (this.#ticks++ % this.#options.sweepEveryTicks === 0) {
      const deleted = await this.store.deleteExpired(now);
      if (deleted > 0) this.#logger.info("expired responses deleted", { deleted });
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    for (const run of this.#runs.values()) run.stop();
    this.#runs.clear();
    await this.#ticking.catch(() => undefined);
  }

  /**
   * Follows a response whose process stopped, from the start of its replay stream: one still queued stays
   * `queued` until its job's `started` comes (a job left in line, see InferenceGateway's keepQueued).
   */
  #resume(stored: StoredResponse): void {
    if (this.#runs.has(stored.id) || this.#closed) return;
    this.#logger.info("following a response taken over from another API process", { responseId: stored.id });
    const run = this.track(stored, true);
    run.await(this.#follow(stored.id, -1, { started: true }));
  }

  async #continuation(id: string, afterSeq: number, error: unknown): Promise<{ job: RunningJob } | { failWith: string | null }> {
    if (this.#closed) return { failWith: null };
    // Released (its client went away, the job runs on): read on from the replay stream.
    if (error instanceof JobReleasedError) return { job: this.#follow(id, afterSeq, { started: true }) };
    // Silent or lost: a job whose record is gone will not come back; else another pass follows it later.
    if (!(await this.#records.find(id))) return { failWith: "The response's job was lost." };
    // Silent because it is still in line (a background response's job waits as long as it takes): read on.
    if (this.#runs.get(id)?.builder.started === false) return { job: this.#follow(id, afterSeq, { started: true }) };
    this.#runs.delete(id);
    return { failWith: null };
  }

  async #finish(id: string, run: ResponseRun): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      try {
        await this.store.finish(id, run.builder.state);
        return;
      } catch (error) {
        // PostgreSQL away: the lease runs out and a recovery pass writes it from the replay stream.
        if (attempt >= 2) throw error;
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    }
  }
}
