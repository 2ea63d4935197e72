import type { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import type { Redis } from "../../src/redis/createRedis.ts";

/**
 * Fencing of a job's runs in its replay stream, by entry ids. A worker cut off from Redis longer than its
 * BullMQ lock (a network partition, a stalled host) is taken for dead, and another worker runs the job
 * again, continuing from what the stream holds; but the first one's engine may go on generating, and
 * its writes, held in its socket or re-sent once it reconnects, would then land in the same stream and
 * reach the API: two generations spliced into one reply.
 *
 * So each run writes its entries with ids of its own: `<run>-<seq + 1>`, where `run` is the number of
 * times BullMQ started the job (its attemptsStarted, counted atomically in Redis as it hands the job
 * out). A run taking over a job first claims the stream, appending the entry `<run>-0`, and only then
 * reads what the earlier run delivered. Redis refuses an XADD whose id is not above the stream's last
 * (atomically, one command), so from the claim on every write of an earlier run is refused: it never
 * enters the stream, is never handed to an API role of the worker's process nor published (the
 * TurnWriter publishes only acknowledged appends), and its run learns it was superseded (the refusal),
 * stops its engine and records nothing. Its writes that landed before the claim are in the stream
 * before the new run reads it, so they are continued, not lost.
 *
 * No second key, no script: the stream's own ordering is the fence, within its one hash slot.
 */

/** Entry id of message `seq` of run `run` (`<run>-0` is the run's claim). */
export function replayEntryId(run: number, seq: number): string {
  return `${run}-${seq + 1}`;
}

/** Redis refused an XADD id not above the stream's last (a later run claimed it, or the append was re-sent). */
export function isRefusedId(error: Error): boolean {
  return error.message.includes("equal or smaller than the target stream top item");
}

/** The run of an entry id (`<run>-<n>`; Redis's clock ids give milliseconds, above any run). */
export function runOfId(id: string): number {
  return Number(id.slice(0, id.indexOf("-")));
}

/** A write refused because a later run claimed the stream (SupersededError, reported to the writer's listeners). */
export class SupersededError extends Error {
  constructor(stream: string) {
    super(`a later run of the job claimed ${stream}`);
    this.name = "SupersededError";
  }
}

/** Whether a write failed because a later run of its job claimed the stream. */
export function isSupersededWrite(error: Error): boolean {
  return error instanceof SupersededError;
}

/**
 * Ids of entries appended with Redis's clock (`*`: written before runs had ids, or the API's end of a
 * job that never started) are milliseconds since 1970: far above any run number.
 */
const CLOCK_IDS_FROM = 1_000_000_000;

/**
 * - `claimed`: the run's entries go after everything earlier runs wrote, which can write no more;
 * - `superseded`: a later run claimed the stream already: this one must do nothing;
 * - `unfenced`: the stream holds entries with Redis's clock ids (an API's end of the job, or a run
 *   before runs had ids): this run writes with Redis's ids too (`*`), unfenced, as before.
 */
export type ClaimOutcome = "claimed" | "superseded" | "unfenced";

export class ReplayFence {
  readonly #redis: Redis;
  readonly #keys: InferenceKeys;
  readonly #options: { ttlSeconds: number; maxLen: number };

  constructor(redis: Redis, keys: InferenceKeys, options: { ttlSeconds: number; maxLen: number }) {
    this.#redis = redis;
    this.#keys = keys;
    this.#options = options;
  }

  /** Claims the completion's replay stream for run `run` of its job (before the run reads it). */
  async claim(completionId: string, run: number): Promise<ClaimOutcome> {
    const stream = this.#keys.replayStream(completionId);
    const results = await this.#redis
      .multi()
      .xadd(stream, "MAXLEN", "~", String(this.#options.maxLen), `${run}-0`, "c", String(run))
      .expire(stream, this.#options.ttlSeconds)
      .exec();
    const refused = results?.[0]?.[0];
    if (!refused) return "claimed";
    if (!isRefusedId(refused)) throw refused;
    const top = (await this.#redis.xrevrange(stream, "+", "-", "COUNT", 1))[0]?.[0] ?? "0-0";
    const topRun = runOfId(top);
    // Its own claim, or an entry of its own: the claim was applied and its command sent again (a reconnection).
    if (topRun === run) return "claimed";
    return topRun > run && topRun < CLOCK_IDS_FROM ? "superseded" : "unfenced";
  }
}

/**
 * The run a job's run writes its entries as: its own (`run`), claimed first when it takes the job over
 * (any mode but "new"); undefined: unfenced (no fence, no run, or a stream of Redis's clock ids); null:
 * a later run has claimed the stream already, and this one must do nothing.
 */
export async function runToWrite(
  fence: Pick<ReplayFence, "claim"> | undefined,
  completionId: string,
  mode: "new" | "redelivered" | "abandoned",
  run: number | undefined,
): Promise<number | undefined | null> {
  if (!fence || run === undefined) return undefined;
  if (mode === "new") return run;
  const claim = await fence.claim(completionId, run);
  return claim === "claimed" ? run : claim === "unfenced" ? undefined : null;
}
