import type { DeltaMessage, UnsequencedDeltaMessage } from "../../src/contracts/deltaMessage.ts";
import type { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import type { EngineDelta } from "../engines/engine.ts";
import type { CoalescingWindow, PendingFlush } from "./coalescingWindow.ts";
import { mergeDeltas } from "./mergeDeltas.ts";

type DeltaOnly = Extract<DeltaMessage, { type: "delta" }>;
import type { TurnWriter } from "./turnWriter.ts";

export type DeltaPublisherOptions = {
  /** The coalescing window, shared by the worker's publishers (it widens under load). */
  window: CoalescingWindow;
  /** The worker's one writer of messages (one socket write per event-loop turn, one PUBLISH per API process). */
  writer: TurnWriter;
  replayTtlSeconds: number;
  replayMaxLen: number;
  /**
   * The sequence number of the first message: 0 for a new job; after the last message an earlier run of
   * the job wrote, when this run picks up where a worker that died stopped.
   */
  firstSeq?: number;
  now?: () => number;
};

/**
 * Writes one completion's messages to Redis, numbered 0, 1, 2, ... (or on from `firstSeq`): to the reply channel of the API
 * process that enqueued the job, for live listening (handed over in process when that API role runs in
 * this process), plus XADD to the completion's capped, expiring replay stream; the TurnWriter sends them
 * with every other message of the same event-loop turn.
 *
 * The first delta goes out at once (the first token is never held back), and so does any delta that
 * comes once the completion's window has passed since its last write. Deltas that come faster are
 * merged and left to the worker's one flush loop (CoalescingWindow), which writes them once the
 * completion's window has passed since its last write, together with the due deltas of every other completion, in
 * the same event-loop tick: the TurnWriter sends a turn's commands in one socket write, so Redis is not
 * written once per token and completion under load.
 */
export class DeltaPublisher implements PendingFlush {
  readonly #completionId: string;
  readonly #replyTo: string;
  readonly #stream: string;
  readonly #options: Required<DeltaPublisherOptions>;
  readonly #firstSeq: number;
  #seq: number;
  #lastWrite = Number.NEGATIVE_INFINITY;
  #pending: EngineDelta | null = null;
  #deltas = 0;
  /** The delta messages written so far (with their numbers and token counts): what a client can have been sent. */
  readonly #sentDeltas: DeltaOnly[] = [];
  /** Settles once every message written so far has reached Redis (or failed). */
  #written: Promise<void> = Promise.resolve();
  #failure: Error | null = null;
  readonly #onFailure = (error: Error): void => {
    this.#failure ??= error;
  };
  #closed = false;

  constructor(keys: InferenceKeys, job: { completionId: string; replyTo: string }, options: DeltaPublisherOptions) {
    this.#completionId = job.completionId;
    this.#replyTo = job.replyTo;
    this.#stream = keys.replayStream(job.completionId);
    this.#options = { now: () => performance.now(), ...options, firstSeq: options.firstSeq ?? 0 };
    this.#firstSeq = this.#options.firstSeq;
    this.#seq = this.#firstSeq;
    options.window.opened();
  }

  /** The delta messages this publisher wrote so far, in order (merged deltas as the one message they became). */
  get deltasWritten(): readonly DeltaOnly[] {
    return this.#sentDeltas;
  }

  /** Number of messages this publisher wrote so far. */
  get written(): number {
    return this.#seq - this.#firstSeq;
  }

  delta(delta: EngineDelta): void {
    if (this.#pending) {
      mergeDeltas(this.#pending, delta);
      return;
    }
    // Written at once when nothing of this completion was written within its window (its first delta
    // included): a token that comes slower than the window waits neither for the flush loop's timer nor
    // its wake-up, which at low load would cost one timer per token and delay every token by the window.
    const windowMs = this.#options.window.currentMs();
    if (this.#deltas === 0 || windowMs === 0 || this.#options.now() - this.#lastWrite >= windowMs) {
      this.#writeDelta(mergeDeltas({}, delta));
      return;
    }
    this.#pending = mergeDeltas({}, delta);
    this.#options.window.schedule(this);
  }

  /** Writes the merged pending deltas now. */
  flush(): void {
    const pending = this.#pending;
    if (!pending) return;
    this.#pending = null;
    this.#options.window.unschedule(this);
    this.#writeDelta(pending);
  }

  /** Called by the worker's flush loop: writes the pending deltas once the window passed since the last write. */
  flushIfDue(): boolean {
    if (!this.#pending) return true;
    if (this.#options.now() - this.#lastWrite < this.#options.window.currentMs()) return false;
    const pending = this.#pending;
    this.#pending = null;
    this.#writeDelta(pending);
    return true;
  }

  /** Any other message: pending deltas go first, so order is kept. */
  send(message: UnsequencedDeltaMessage): void {
    this.flush();
    this.#write(message);
  }

  /** Flushes and waits until every write reached Redis; rejects when one failed. */
  async close(): Promise<void> {
    this.flush();
    if (!this.#closed) this.#options.window.closed();
    this.#closed = true;
    await this.#written;
    if (this.#failure) throw this.#failure;
  }

  #writeDelta(delta: EngineDelta): void {
    this.#deltas += 1;
    this.#lastWrite = this.#options.now();
    // The token count travels beside the delta (the API relays the delta; the count is for a worker
    // continuing the reply after a crash, and for nothing else).
    const { tokens, ...text } = delta;
    this.#write(tokens === undefined ? { type: "delta", delta: text } : { type: "delta", delta: text, tokens });
  }

  #write(message: UnsequencedDeltaMessage): void {
    const sequenced = { ...message, seq: this.#seq++ } as DeltaMessage;
    if (sequenced.type === "delta") this.#sentDeltas.push(sequenced);
    // The expiry is (re)set on the first and last messages and now and then between, not on every delta.
    const last = sequenced.type === "usage" || sequenced.type === "error";
    const expire = sequenced.seq % 256 === 0 || sequenced.seq === this.#firstSeq || last ? this.#options.replayTtlSeconds : null;
    this.#written = this.#options.writer.write({
      stream: this.#stream,
      maxLen: this.#options.replayMaxLen,
      expireSeconds: expire,
      replyTo: this.#replyTo,
      completionId: this.#completionId,
      message: sequenced,
      messageJson: JSON.stringify(sequenced),
      onFailure: this.#onFailure,
    });
  }
}
