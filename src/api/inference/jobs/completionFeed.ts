import type { DeltaMessage } from "../../../contracts/deltaMessage.ts";

/** How a feed refills what the shared subscriber missed (see CompletionFeed). */
export type FeedRecovery = {
  /** Between two reads of the replay stream while recovering. */
  retryMs: number;
  /**
   * How long a feed keeps refilling after the subscriber reconnected, and how long a gap may stay
   * unfilled by reads that succeeded before the feed gives up on it (its entries were lost with Redis).
   */
  windowMs: number;
  /**
   * A gap a read finds behind a later message is lost at once (default true). A batch line's feed waits
   * for the window instead: its line runs again under the same completion id while the earlier run may
   * still write, and its dispatcher follows or runs it again.
   */
  lostAtOnce?: boolean;
};

export const DEFAULT_FEED_RECOVERY: FeedRecovery = { retryMs: 250, windowMs: 5_000 };

/**
 * The messages of one completion, in sequence order, as the API consumes them. Messages come from the
 * shared subscriber; what it missed (messages published while it reconnected) is refilled from the
 * completion's replay stream:
 *
 * - a gap in the sequence is refilled at once, and again every `retryMs` until it is filled (a read
 *   that fails while Redis is still away is tried again, never left to the idle timeout);
 * - after the subscriber reconnected (`recover()`), the replay stream is read every `retryMs` for
 *   `windowMs`: the missed messages may have been the last ones (silence, no later message shows a gap),
 *   and a worker may write what it held while Redis was away only once its own connection is back;
 * - a gap that reads which succeeded could not fill for `windowMs` cannot be filled (its entries were
 *   lost with Redis): the feed is then `lost`, and its reader hears at once (next() resolves undefined);
 * - so is a gap that a read finds behind a later message of the stream (what was written before that
 *   message was lost), at once, once the feed has had messages of the job.
 */
export class CompletionFeed {
  readonly completionId: string;
  readonly #refill: (completionId: string) => Promise<DeltaMessage[]>;
  readonly #onClose: (feed: CompletionFeed) => void;
  readonly #recovery: FeedRecovery;
  #nextSeq = 0;
  readonly #outOfOrder = new Map<number, DeltaMessage>();
  #ready: DeltaMessage[] = [];
  #wake: (() => void) | null = null;
  /**
   * The wait's timeout: one timer per feed, re-armed for each wait (refresh) rather than a timer made and
   * cleared per message; left armed after a wake (it then finds no reader and does nothing).
   */
  #timer: NodeJS.Timeout | null = null;
  #timerMs = 0;
  readonly #timedOut = () => {
    const wake = this.#wake;
    this.#wake = null;
    wake?.();
  };
  #filling: Promise<boolean> | null = null;
  /** Until when (ms since epoch) the recovery loop reads the replay stream even without a gap. */
  #recoverUntil = 0;
  #recovering = false;
  #lost = false;
  #closed = false;

  constructor(
    completionId: string,
    refill: (completionId: string) => Promise<DeltaMessage[]>,
    onClose: (feed: CompletionFeed) => void,
    recovery: FeedRecovery = DEFAULT_FEED_RECOVERY,
  ) {
    this.completionId = completionId;
    this.#refill = refill;
    this.#onClose = onClose;
    this.#recovery = recovery;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Messages were missed that the replay stream no longer has: nothing after them can be delivered in order. */
  get lost(): boolean {
    return this.#lost;
  }

  /** Called by the subscriber for every message of this completion. */
  push(message: DeltaMessage): void {
    this.#accept(message);
    if (this.#outOfOrder.size) this.#recover();
    this.#wakeReader();
  }

  /** The subscriber reconnected: messages may have been missed. Reads the replay stream for a while. */
  recover(): void {
    if (this.#closed) return;
    this.#recoverUntil = Date.now() + this.#recovery.windowMs;
    this.#recover();
  }

  /** The next message, or undefined when none came within timeoutMs (after one attempt to refill) or the feed is lost. */
  async next(timeoutMs: number): Promise<DeltaMessage | undefined> {
    if (this.#ready.length) return this.#ready.shift();
    if (this.#closed || this.#lost) return undefined;
    await this.#waitFor(timeoutMs);
    if (!this.#ready.length && !this.#lost && !this.#closed) await this.#fillGap();
    return this.#ready.shift();
  }

  /** Stops listening; the job itself is not affected. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#ready = [];
    this.#outOfOrder.clear();
    this.#wakeReader();
    this.#onClose(this);
  }

  #accept(message: DeltaMessage): void {
    if (this.#closed || message.seq < this.#nextSeq) return;
    this.#outOfOrder.set(message.seq, message);
    while (this.#outOfOrder.has(this.#nextSeq)) {
      this.#ready.push(this.#outOfOrder.get(this.#nextSeq)!);
      this.#outOfOrder.delete(this.#nextSeq);
      this.#nextSeq += 1;
    }
  }

  #wakeReader(): void {
    if ((this.#ready.length || this.#closed || this.#lost) && this.#wake) {
      const wake = this.#wake;
      this.#wake = null;
      wake();
    }
  }

  /** Reads the replay stream until the gap is filled and the reconnect window has passed (one loop per feed). */
  #recover(): void {
    if (this.#recovering || this.#closed || this.#lost) return;
    this.#recovering = true;
    void this.#recoverLoop().finally(() => {
      this.#recovering = false;
    });
  }

  async #recoverLoop(): Promise<void> {
    /** When a read that succeeded first left a gap unfilled (null: no such read yet). */
    let unfilledSince: number | null = null;
    while (!this.#closed) {
      const read = await this.#fillGap();
      if (this.#lost) return;
      const now = Date.now();
      if (!this.#outOfOrder.size) unfilledSince = null;
      else if (read) unfilledSince ??= now;
      if (unfilledSince !== null && now - unfilledSince >= this.#recovery.windowMs) {
        this.#lost = true;
        this.#wakeReader();
        return;
      }
      if (!this.#outOfOrder.size && now >= this.#recoverUntil) return;
      await new Promise((resolve) => setTimeout(resolve, this.#recovery.retryMs));
    }
  }

  #waitFor(timeoutMs: number): Promise<void> {
    return new Promise((resolve) => {
      this.#wake = resolve;
      if (this.#timer && this.#timerMs === timeoutMs) {
        this.#timer.refresh();
      } else {
        if (this.#timer) clearTimeout(this.#timer);
        this.#timer = setTimeout(this.#timedOut, timeoutMs);
        this.#timerMs = timeoutMs;
      }
    });
  }

  /** One read of the replay stream (shared by concurrent callers); resolves whether it succeeded. */
  #fillGap(): Promise<boolean> {
    this.#filling ??= this.#refill(this.completionId)
      .then((messages) => {
        for (const message of messages) this.#accept(message);
        // The stream holds a message after the gap but not the gap's: a worker appends a job's messages
        // in order, so the missing ones were written before it and lost with Redis (restarted empty), or
        // trimmed. Waiting cannot fill the gap: the feed is lost now, while its job may still run (its
        // worker then charges only what the client was sent, not the reply it finishes meanwhile).
        // (Only once this run's messages were coming: a feed that has none yet may read what an earlier run
        // under the same completion id left, a batch line's run again.)
        if (this.#recovery.lostAtOnce !== false && this.#nextSeq > 0 && this.#outOfOrder.size && messages.some((message) => message.seq > this.#nextSeq))
          this.#lost = true;
        this.#wakeReader();
        return true;
      })
      .catch(() => false)
      .finally(() => {
        this.#filling = null;
      });
    return this.#filling;
  }
}
