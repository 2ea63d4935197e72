import type { Pool, PoolClient } from "../src/db/createPool.ts";
import { isDatabaseUnavailable } from "../src/db/databaseUnavailable.ts";
import type { Logger } from "../src/observability/logger.ts";
import { throttledWarning } from "../src/observability/throttledWarning.ts";
import type { Projection } from "./projection.ts";
import { PROJECTION_LOCK_SPACE } from "./projectionLocks.ts";
import { projectNextBatch } from "./projectNextBatch.ts";

export type ProjectionRunnerOptions = {
  pool: Pool;
  logger: Logger;
  projections: Projection[];
  /** Events per transaction. */
  batchSize: number;
  /** Wait between polls when the log has nothing new (and between lock attempts while standing by). */
  pollIntervalMs: number;
  /**
   * While the log stays idle the wait doubles after each empty poll, up to this (default 10 x
   * pollIntervalMs); the first batch found brings it back to pollIntervalMs.
   */
  idlePollMaxMs?: number;
};

/** The longest wait between polls of an idle log, as a multiple of the poll interval (by default). */
const IDLE_BACKOFF_FACTOR = 10;

/**
 * Follows the event log and keeps each projection's read model up to date.
 *
 * - One loop per projection. A loop first takes the projection's PostgreSQL advisory lock on a dedicated
 *   connection (pg_try_advisory_lock): one instance is active per projection, the others stand by and
 *   retry every poll interval; if the active one dies its connection closes, the lock is freed and a
 *   stand-by takes over.
 * - The active loop reads the log after its checkpoint with the gap-safe reader (readAll: ordered by
 *   (transaction_id, global_position), only transactions older than every one still in flight), applies
 *   the batch and moves the checkpoint with compare-and-set, all in ONE transaction on the locked
 *   connection: a crash at any moment leaves either the whole batch with its checkpoint or neither, so
 *   every event is applied exactly once.
 * - It polls: immediately after a full batch (a backlog); after a partial batch it waits
 *   pollIntervalMs, so that under load one transaction takes what arrived meanwhile (with a batch
 *   after every trickle of events, the two projections ran about 7 statements per batch of 8 events
 *   in `npm run bench`'s closed loop); after a poll that found nothing it waits
 *   pollIntervalMs, and twice as long after each further empty poll, up to idlePollMaxMs (10 x
 *   pollIntervalMs: 1 s by default). An idle platform then asks PostgreSQL once a second per
 *   projection instead of ten times (each poll is a transaction of five statements: about 25 ms of
 *   PostgreSQL CPU a second at idle without the backoff); under load, events keep the wait at
 *   pollIntervalMs. Read models follow the log within pollIntervalMs under load, within about a
 *   second after a quiet spell. No LISTEN/NOTIFY: a NOTIFY per append would serialise every
 *   committing transaction on the notification queue lock.
 */
export class ProjectionRunner {
  readonly #options: ProjectionRunnerOptions;
  readonly #stop = new AbortController();
  #loops: Promise<void>[] = [];

  constructor(options: ProjectionRunnerOptions) {
    this.#options = options;
  }

  start(): void {
    if (this.#loops.length) return;
    this.#loops = this.#options.projections.map((projection) => this.#run(projection));
  }

  async stop(): Promise<void> {
    this.#stop.abort();
    await Promise.all(this.#loops);
    this.#loops = [];
  }

  /** Applies at most one batch of new events to the projection on `client` (see projectNextBatch). */
  step(client: PoolClient, projection: Projection): Promise<number> {
    return projectNextBatch(client, projection, this.#options.batchSize);
  }

  async #run(projection: Projection): Promise<void> {
    const { pool, logger, pollIntervalMs } = this.#options;
    const idlePollMaxMs = Math.max(pollIntervalMs, this.#options.idlePollMaxMs ?? pollIntervalMs * IDLE_BACKOFF_FACTOR);
    const log = logger.child({ projection: projection.name });
    const signal = this.#stop.signal;
    const onConnectionError = (error: Error) => log.warn("projection connection lost", { error });
    // An outage fails every retry (once a second): a line every 10 s with the count of those left out.
    const warnUnavailable = throttledWarning(log, "projection failed: database unavailable; retrying");
    while (!signal.aborted) {
      let client: PoolClient | null = null;
      try {
        client = await pool.connect();
        // A checked-out client whose connection drops emits 'error'; without a listener that would crash
        // the process. The next query fails too and the catch below recovers.
        client.on("error", onConnectionError);
        const locked = await client.query<{ locked: boolean }>("SELECT pg_try_advisory_lock($1, hashtext($2)) AS locked", [
          PROJECTION_LOCK_SPACE.active,
          projection.name,
        ]);
        if (!locked.rows[0]!.locked) {
          client.off("error", onConnectionError);
          client.release();
          client = null;
          await sleep(pollIntervalMs, signal);
          continue;
        }
        log.info("projection active");
        let idleWaitMs = pollIntervalMs;
        while (!signal.aborted) {
          const applied = await this.step(client, projection);
          // A full batch: more may wait, go on at once. A partial one: caught up, so wait a poll interval
          // and take what arrived meanwhile in one transaction, not one transaction per trickle of events.
          if (applied >= this.#options.batchSize) continue;
          if (applied > 0) {
            idleWaitMs = pollIntervalMs;
            await sleep(pollIntervalMs, signal);
            continue;
          }
          await sleep(idleWaitMs, signal);
          idleWaitMs = Math.min(idleWaitMs * 2, idlePollMaxMs);
        }
        await client.query("SELECT pg_advisory_unlock($1, hashtext($2))", [PROJECTION_LOCK_SPACE.active, projection.name]);
        client.off("error", onConnectionError);
        client.release();
        client = null;
      } catch (error) {
        // A lost or unreachable database is retried like any failure, but is an outage's, not a defect's:
        // a warning without a stack. Anything else (a bad event, a bug in a projection) stays an error.
        if (isDatabaseUnavailable(error)) warnUnavailable({ cause: (error as Error).message });
        else log.error("projection failed; retrying", { error: error as Error });
        // Destroy the connection: a broken one must not return to the pool, and closing it frees the lock.
        client?.off("error", onConnectionError);
        client?.release(error as Error);
        client = null;
        await sleep(Math.max(pollIntervalMs, 1000), signal);
      }
    }
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}
