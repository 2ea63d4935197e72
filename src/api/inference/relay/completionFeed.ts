import type { DeltaMessage } from "../../../contracts/deltaMessage.ts";

/**
 * The messages of one completion, in sequence order, as the API consumes them. Messages come from the
 * shared subscriber; a gap in the sequence (a message lost while the subscriber reconnected) is filled
 * from the completion's replay stream.
 */
export class CompletionFeed {
  readonly completionId: string;
  readonly #refill: (completionId: string) => Promise<DeltaMessage[]>;
  readonly #onClose: (feed: CompletionFeed) => void;
  #nextSeq = 0;
  readonly #outOfOrder = new Map<number, DeltaMessage>();
  #ready: DeltaMessage[] = [];
  #wake: (() => void) | null = null;
  #filling: Promise<void> | null = null;
  #closed = false;

  constructor(completionId: string, refill: (completionId: string) => Promise<DeltaMessage[]>, onClose: (feed: CompletionFeed) => void) {
    this.completionId = completionId;
    this.#refill = refill;
    this.#onClose = onClose;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Called by the subscriber for every message of this completion. */
  push(message: DeltaMessage): void {
    if (this.#closed || message.seq < this.#nextSeq) return;
    this.#outOfOrder.set(message.seq, message);
    while (this.#outOfOrder.has(this.#nextSeq)) {
      this.#ready.push(this.#outOfOrder.get(this.#nextSeq)!);
      this.#outOfOrder.delete(this.#nextSeq);
      this.#nextSeq += 1;
    }
    if (this.#outOfOrder.size) void this.#fillGap();
    if (this.#ready.length && this.#wake) {
      const wake = this.#wake;
      this.#wake = null;
      wake();
    }
  }

  /** The next message, or undefined when none came within timeoutMs (after one attempt to refill). */
  async next(timeoutMs: number): Promise<DeltaMessage | undefined> {
    if (this.#ready.length) return this.#ready.shift();
    if (this.#closed) return undefined;
    await this.#waitFor(timeoutMs);
    if (!this.#ready.length) await this.#fillGap();
    return this.#ready.shift();
  }

  /** Stops listening; the job itself is not affected. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#ready = [];
    this.#outOfOrder.clear();
    this.#wake?.();
    this.#wake = null;
    this.#onClose(this);
  }

  #waitFor(timeoutMs: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.#wake = null;
        resolve();
      }, timeoutMs);
      this.#wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }

  #fillGap(): Promise<void> {
    this.#filling ??= this.#refill(this.completionId)
      .then((messages) => {
        for (const message of messages) if (message.seq >= this.#nextSeq) this.push(message);
      })
      .catch(() => undefined)
      .finally(() => {
        this.#filling = null;
      });
    return this.#filling;
  }
}
