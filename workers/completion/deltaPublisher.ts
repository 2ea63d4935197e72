import type { DeltaMessage, EngineDeltaMessage, UnsequencedDeltaMessage } from "../../src/contracts/deltaMessage.ts";
import type { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import type { EngineDelta } from "../engines/engine.ts";
import type { CoalescingWindow, PendingFlush } from "./coalescingWindow.ts";
import { mergeDeltas } from "./mergeDeltas.ts";
import { SentDeltas, type SentOutput } from "./sentDeltas.ts";
import type { TurnWriter } from "./turnWriter.ts";
import { isSupersededWrite, replayEntryId } from "./replayFence.ts";

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
  /**
   * The run of the job this publisher writes for (ReplayFence): its entries get the ids `<run>-<seq + 1>`,
   * which Redis refuses once a later run claimed the stream. Undefined: Redis's ids (`*`), unfenced.
   */
  run?: number;
  /** Called once, when a write was refused because a later run of the job claimed its stream. */
  onSuperseded?: () => void;
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
 *
 * Per written delta it makes the message's delta (the engine's without its token count, or the merged
 * ones), the message and its JSON text, and nothing per token beyond the merge; what was written is kept
 * as numbers (SentDeltas), not as the messages.
 */
export class DeltaPublisher implements PendingFlush {
  readonly #completionId: string;
  readonly #replyTo: string;
  readonly #stream: string;
  readonly #options: Required<Omit<DeltaPublisherOptions, "run" | "onSuperseded">>;
  readonly #run: number | undefined;
  readonly #onSuperseded: (() => void) | undefined;
  readonly #firstSeq: number;
  #seq: number;
  #lastWrite = Number.NEGATIVE_INFINITY;
  /** When the engine's previous delta came (held or written). */
  #lastDeltaAt = Number.NEGATIVE_INFINITY;
  /** The deltas merged since the last write, and their tokens summed (undefined: none carried a count). */
  #pending: EngineDeltaMessage | null = null;
  #pendingTokens: number | undefined = undefined;
  #deltas = 0;
  /** The delta messages written so far (their numbers and token counts): what a client can have been sent. */
  readonly #sent = new SentDeltas();
  /** Settles once every message written so far has reached Redis (or failed). */
  #written: Promise<void> = Promise.resolve();
  #failure: Error | null = null;
  #superseded = false;
  readonly #onFailure = (error: Error): void => {
    this.#failure ??= error;
    if (this.#superseded || !isSupersededWrite(error)) return;
    this.#superseded = true;
    this.#onSuperseded?.();
  };
  #closed = false;
  /** How long the replay stream is kept after the last message (the job's; undefined: the retention). */
  readonly #keptAfterEndS: number | undefined;

  constructor(keys: InferenceKeys, job: { completionId: string; replyTo: string; replayKeptAfterEndS?: number }, options: DeltaPublisherOptions) {
    this.#completionId = job.completionId;
    this.#keptAfterEndS = job.replayKeptAfterEndS;
    this.#replyTo = job.replyTo;
    this.#stream = keys.replayStream(job.completionId);
    this.#options = { now: () => performance.now(), ...options, firstSeq: options.firstSeq ?? 0 };
    this.#run = options.run;
    this.#onSuperseded = options.onSuperseded;
    this.#firstSeq = this.#options.firstSeq;
    this.#seq = this.#firstSeq;
    options.window.opened();
  }

  /** What the delta messages this publisher wrote, numbered up to `seq`, hold (merged deltas as the one message they became). */
  sentThrough(seq: number): SentOutput {
    return this.#sent.through(seq);
  }

  /** Number of messages this publisher wrote so far. */
  get written(): number {
    return this.#seq - this.#firstSeq;
  }

  /** One delta of the engine (not kept: its output is copied into the message or the pending merge). */
  delta(delta: EngineDelta): void {
    const now = this.#options.now();
    const sinceLastDelta = now - this.#lastDeltaAt;
    this.#lastDeltaAt = now;
    if (this.#pending) {
      mergeDeltas(this.#pending, delta);
      if (delta.tokens !== undefined) this.#pendingTokens = (this.#pendingTokens ?? 0) + delta.tokens;
      return;
    }
    // Written at once when nothing of this completion was written within its window (its first delta
    // included): a token that comes slower than the window waits neither for the flush loop's timer nor
    // its wake-up, which at low load would cost one timer per token and delay every token by the window.
    // Also when this stream's tokens come at least half a window apart: holding one would merge at most
    // two tokens and delay each by up to a window (a window widened to 50 ms under load against an
    // engine's 50 ms a token held about every other token). Only fast streams are merged.
    const windowMs = this.#options.window.currentMs();
    if (this.#deltas === 0 || windowMs === 0 || now - this.#lastWrite >= windowMs || sinceLastDelta >= windowMs / 2) {
      this.#writeDelta(mergeDeltas({}, delta), delta.tokens);
      return;
    }
    this.#pending = mergeDeltas({}, delta);
    this.#pendingTokens = delta.tokens;
    this.#options.window.schedule(this);
  }

  /** Writes the merged pending deltas now. */
  flush(): void {
    if (!this.#pending) return;
    this.#options.window.unschedule(this);
    this.#writePending();
  }

  /** Called by the worker's flush loop: writes the pending deltas once the window passed since the last write. */
  flushIfDue(): boolean {
    if (!this.#pending) return true;
    if (this.#options.now() - this.#lastWrite < this.#options.window.currentMs()) return false;
    this.#writePending();
    return true;
  }

  /** Any other message: pending deltas go first, so order is kept. */
  send(message: UnsequencedDeltaMessage): void {
    this.flush();
    this.#write(message);
  }

  /**
   * A write was refused because a later run of the job claimed its stream (its worker took this run for
   * dead): this run's messages reach nobody from then on, and it must record nothing.
   */
  get superseded(): boolean {
    return this.#superseded;
  }

  /** Flushes and waits until every write so far settled (whether it failed: see `superseded`). */
  async settled(): Promise<void> {
    this.flush();
    await this.#written;
  }

  /** Flushes and waits until every write reached Redis; rejects when one failed. */
  async close(): Promise<void> {
    this.flush();
    if (!this.#closed) this.#options.window.closed();
    this.#closed = true;
    await this.#written;
    if (this.#failure) throw this.#failure;
  }

  #writePending(): void {
    const pending = this.#pending!;
    const tokens = this.#pendingTokens;
    this.#pending = null;
    this.#pendingTokens = undefined;
    this.#writeDelta(pending, tokens);
  }

  /** `delta`: the message's own (a copy or a merge, never the engine's object). */
  #writeDelta(delta: EngineDeltaMessage, tokens: number | undefined): void {
    this.#deltas += 1;
    this.#lastWrite = this.#options.now();
    // The token count travels beside the delta (the API relays the delta; the count is for a worker
    // continuing the reply after a crash, and for nothing else). Built as one object, its keys in the
    // order the JSON text always had.
    const seq = this.#seq++;
    this.#append(tokens === undefined ? { type: "delta", delta, seq } : { type: "delta", delta, tokens, seq });
  }

  #write(message: UnsequencedDeltaMessage): void {
    this.#append({ ...message, seq: this.#seq++ } as DeltaMessage);
  }

  #append(sequenced: DeltaMessage): void {
    // Superseded: whatever it writes would be refused too.
    if (this.#superseded) return;
    if (sequenced.type === "delta") this.#sent.record(sequenced.seq, sequenced.delta, sequenced.tokens);
    // The expiry is (re)set on the first and last messages and now and then between, not on every delta.
    const last = sequenced.type === "usage" || sequenced.type === "error";
    const expire = last
      ? (this.#keptAfterEndS ?? this.#options.replayTtlSeconds)
      : sequenced.seq % 256 === 0 || sequenced.seq === this.#firstSeq
        ? this.#options.replayTtlSeconds
        : null;
    this.#written = this.#options.writer.write({
      stream: this.#stream,
      id: this.#run === undefined ? "*" : replayEntryId(this.#run, sequenced.seq),
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
