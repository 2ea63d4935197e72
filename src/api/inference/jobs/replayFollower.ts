import { isTerminal, type DeltaMessage } from "../../../contracts/deltaMessage.ts";
import type { InferenceKeys } from "../../../contracts/inferenceKeys.ts";
import { decodeReplayEntry } from "../../../contracts/replyBatch.ts";
import { duplicateAs, type Redis } from "../../../redis/createRedis.ts";
import { InternalApiError, ReplyLostError, ServiceUnavailableError } from "../../http/errors.ts";
import { EndedBeforeResumeError, JobReleasedError, type RunningJob } from "./runningJob.ts";

/** Longest single blocking read: a released follower's connection is closed at once anyway. */
const BLOCK_MS = 2_000;
/**
 * How long past its BLOCK time a read may go unanswered: longer, and Redis is away (down, or its
 * connection black-holed: the connection kind re-sends a read once it reconnects, so the read itself
 * would wait for the whole outage).
 */
const READ_SLACK_MS = 1_000;

/**
 * A completion's messages read from its replay stream (InferenceKeys.replayStream), from the start or
 * after a sequence number, and then as the worker appends them: what a client that resumes (Last-Event-ID)
 * or attaches (the same Idempotency-Key) gets, in any API process. Skips `started` (unless `started` is
 * set: a follower that must tell when a queued job starts, a background response's). Reads block on a
 * connection of its own (a duplicate of `redis`), closed on release.
 */
export class ReplayFollower implements RunningJob {
  readonly completionId: string;
  readonly #connection: Redis;
  readonly #stream: string;
  readonly #idleTimeoutMs: number;
  #afterSeq: number;
  #lastEntryId = "0-0";
  #buffer: DeltaMessage[] = [];
  #released = false;
  /** The sequence number of a terminal message read at or before the resume point (nothing after it will come), or null. */
  #endedBefore: number | null = null;
  readonly #started: boolean;
  readonly #gapless: boolean;
  /** A message was missing (lost with Redis) before one read: the read ends with a 503. */
  #gap = false;
  /** A message after the resume point was read: every next one must follow it. */
  #lastRead = false;

  constructor(
    redis: Redis,
    keys: InferenceKeys,
    completionId: string,
    options: { afterSeq: number; idleTimeoutMs: number; started?: boolean; gapless?: boolean },
  ) {
    this.completionId = completionId;
    // Its reads block for seconds: a connection without the request path's command timeout.
    this.#connection = duplicateAs(redis, "subscriber");
    this.#connection.on("error", () => undefined);
    this.#stream = keys.replayStream(completionId);
    this.#afterSeq = options.afterSeq;
    this.#idleTimeoutMs = options.idleTimeoutMs;
    this.#started = options.started === true;
    this.#gapless = options.gapless === true;
  }

  async next(): Promise<DeltaMessage> {
    const deadline = Date.now() + this.#idleTimeoutMs;
    for (;;) {
      const message = this.#buffer.shift();
      if (message) return message;
      if (this.#released) throw new JobReleasedError();
      if (this.#gap) {
        this.release();
        throw new ReplyLostError();
      }
      if (this.#endedBefore !== null) throw new EndedBeforeResumeError(this.#endedBefore, this.#afterSeq);
      const left = deadline - Date.now();
      if (left <= 0) {
        this.release();
        throw new InternalApiError("The model stopped answering.");
      }
      await this.#read(Math.min(left, BLOCK_MS));
    }
  }

  release(): void {
    if (this.#released) return;
    this.#released = true;
    this.#connection.disconnect();
  }

  async #read(blockMs: number): Promise<void> {
    let result: [string, [string, string[]][]][] | null;
    try {
      result = (await this.#answered(this.#connection.xread("BLOCK", blockMs, "STREAMS", this.#stream, this.#lastEntryId), blockMs)) as typeof result;
      // Nothing came, after entries did: were they lost with Redis (restarted empty), nothing more comes.
      if (result === null && this.#lastEntryId !== "0-0" && (await this.#answered(this.#connection.exists(this.#stream), 0)) === 0) this.#gap = true;
    } catch (error) {
      // Released by its reader (its connection closed under the read): nothing more to read.
      if (this.#released && !(error instanceof ServiceUnavailableError)) return;
      throw error;
    }
    for (const [, entries] of result ?? []) {
      for (const [entryId, fields] of entries) {
        this.#lastEntryId = entryId;
        const message = decodeReplayEntry(fields);
        if (message && message.seq <= this.#afterSeq && isTerminal(message)) this.#endedBefore ??= message.seq;
        if (!message || message.seq <= this.#afterSeq) continue;
        // A message missing before this one (lost with Redis, which came back and took the job's next
        // writes): the reply cannot go on whole. (A gapless follower, a batch line's, reads from the start.)
        if (message.seq !== this.#afterSeq + 1 && (this.#gapless || this.#lastRead)) {
          this.#gap = true;
          return;
        }
        this.#afterSeq = message.seq;
        this.#lastRead = true;
        if (message.type === "started" && !this.#started) continue;
        this.#buffer.push(message);
      }
    }
  }

  /**
   * A command's answer, or (none within `blockMs` + READ_SLACK_MS: Redis is away) the follower released
   * and a 503, as a POST's feed ends: the connection kind re-sends a command once it reconnects, so the
   * command alone would wait for the whole outage, or for ever on a black-holed connection.
   */
  async #answered<T>(command: Promise<T>, blockMs: number): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const unanswered = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        command.catch(() => undefined);
        this.release();
        reject(new ServiceUnavailableError("redis"));
      }, blockMs + READ_SLACK_MS);
    });
    try {
      return await Promise.race([command, unanswered]);
    } finally {
      clearTimeout(timer);
    }
  }
}
