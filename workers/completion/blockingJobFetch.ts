import { Job, raw2NextJobData, type RedisQueueBackend, type Worker } from "bullmq";
import { Packr } from "msgpackr";

/** BullMQ packs the moveToActive options with these settings (RedisQueueBackend's own Packr). */
const packer = new Packr({ useRecords: false, encodeUndefinedAsNil: true });
/** BullMQ's longest block (10 s, RedisQueueBackend.maximumBlockTimeout) and its worker's drain delay (5 s). */
const MAX_BLOCK_S = 10;
const IDLE_BLOCK_S = 5;
/** A blocking fetch with no answer this long after its timeout is stuck (see #watchdog). */
const WATCHDOG_GRACE_MS = 1_000;

/** What a fetch found: a job (locked with the fetch's token), or nothing before the block timed out. */
export type FetchedJob<T> = (Job<T> & { id: string }) | undefined;

/**
 * The blocking fetch of a CompletionWorker: waits on the queue's marker and takes the job in the same
 * Redis round trip.
 *
 * BullMQ's own blocking fetch (`Worker.getNextJob`) sends `BZPOPMIN marker` on its blocking
 * connection, and only when that answers sends the `moveToActive` script on its command connection: a
 * job arriving at an idle worker wakes the worker once for the marker and once more for the job, with
 * a round trip to Redis in between. Here both commands go out together, in one write, on the blocking
 * connection:
 *
 *   in:  BZPOPMIN <marker> <timeout>, then EVALSHA moveToActive (the keys and arguments of
 *        RedisQueueBackend.moveToActive: the job lock token, the lock duration, no limiter)
 *   out: the marker (or nil on timeout), then the job (or none)
 *
 * Redis keeps the second command in the connection's input buffer while the first is blocked and runs
 * it as soon as the first returns, so the job's data comes back in the same reply as the wake-up. A
 * marker without a job (taken by another worker, or a delayed job's marker) just yields nothing; the
 * caller fetches again. One fetch at a time per worker: the blocking connection serves one command at
 * a time.
 *
 * The script's timestamp is the one the fetch was sent with: a job taken after a wait has the wait's
 * start as its `processedOn`, and a delayed job that fell due during the wait is promoted by the fetch
 * after (one more round trip, at most a Redis timer tick late, as with BullMQ's own fetch).
 *
 * Coupled to BullMQ's moveToActive script (its keys and packed options); bullmq is pinned, and the
 * worker's tests run this against real Redis.
 */
export class BlockingJobFetch<T> {
  readonly #worker: Worker<T>;
  readonly #backend: RedisQueueBackend;
  readonly #lockDurationMs: number;
  /** Epoch ms of the next delayed job (from the last fetch that found none), 0 when there is none. */
  #delayedUntil = 0;

  constructor(worker: Worker<T>, lockDurationMs: number) {
    this.#worker = worker;
    this.#backend = worker.backend as RedisQueueBackend;
    this.#lockDurationMs = lockDurationMs;
  }

  /** Waits (up to a few seconds) for a job and takes it; undefined when none came. */
  async fetch(token: string): Promise<FetchedJob<T>> {
    const client = await this.#backend.blockingClient;
    if (client === undefined) throw new Error("the queue worker has no blocking connection");
    const keys = this.#worker.keys;
    const moveToActiveKeys = [
      keys.wait!, keys.active!, keys.prioritized!, keys.events!, keys.stalled!, keys.limiter!,
      keys.delayed!, keys.paused!, keys.meta!, keys.pc!, keys.marker!,
    ];
    const options = packer.pack({ token, lockDuration: this.#lockDurationMs, limiter: undefined, name: undefined });
    const timeoutS = this.#blockTimeoutS();
    const pipeline = client.pipeline();
    pipeline.runCommand("bzpopmin", [keys.marker!, timeoutS]);
    this.#backend.execCommand(pipeline, "moveToActive", [...moveToActiveKeys, keys[""]!, Date.now(), options]);
    const replies = await this.#watchdog(pipeline.exec(), timeoutS);
    if (!replies) return undefined;
    const [, [error, raw]] = replies as [unknown, [Error | null, unknown[]]];
    if (error) throw error;
    const [jobJson, id, , delayUntil] = raw2NextJobData(raw) as [Parameters<typeof Job.fromJSON>[1] | null, string, number, number];
    if (!jobJson) {
      this.#delayedUntil = Number(delayUntil) || 0;
      return undefined;
    }
    this.#delayedUntil = 0;
    const job = Job.fromJSON(this.#worker, jobJson, id) as Job<T> & { id: string };
    job.token = token;
    return job;
  }

  /** BullMQ's choice: up to the next delayed job (capped), else the drain delay. */
  #blockTimeoutS(): number {
    if (this.#delayedUntil === 0) return IDLE_BLOCK_S;
    const untilS = (this.#delayedUntil - Date.now()) / 1000;
    return Math.min(MAX_BLOCK_S, Math.max(0.001, untilS));
  }

  /**
   * With `maxRetriesPerRequest: null`, ioredis re-sends a blocking command interrupted by a connection
   * reset after it reconnects, and may then never settle it (BullMQ #4479): a fetch that has not
   * answered a second after its timeout counts as empty, and the blocking connection is reset
   * (BullMQ's own watchdog does the same), which also drops the abandoned commands.
   */
  async #watchdog<R>(replies: Promise<R>, timeoutS: number): Promise<R | undefined> {
    replies.catch(() => undefined);
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<undefined>((resolve) => {
      timer = setTimeout(resolve, timeoutS * 1000 + WATCHDOG_GRACE_MS, undefined);
    });
    const stuck = Symbol("stuck");
    try {
      const result = await Promise.race([replies, timedOut.then(() => stuck)]);
      if (result !== stuck) return result as R;
    } finally {
      clearTimeout(timer);
    }
    if (this.#worker.closing) return undefined;
    await this.#backend.reconnectBlocking();
    await this.#backend.disconnectBlocking(true);
    await this.#backend.reconnectBlocking();
    return undefined;
  }
}
