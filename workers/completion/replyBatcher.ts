import type { Redis } from "../../src/messaging/createRedis.ts";
import { encodeReplyBatch, encodeReplyEntry } from "../../src/messaging/replyBatch.ts";

type Batch = { entries: string[]; sent: Promise<void>; resolve: () => void; reject: (error: unknown) => void };

/**
 * The worker's one writer of live messages: everything written for one API process (reply channel)
 * during an event-loop turn leaves as ONE PUBLISH at the end of that turn (setImmediate), whatever the
 * number of completions and tokens in it. Nothing waits longer than the current turn, so the first
 * token of a completion is never held back; under load Redis and the API get one message per turn.
 */
export class ReplyBatcher {
  readonly #redis: Redis;
  readonly #batches = new Map<string, Batch>();
  #scheduled = false;

  constructor(redis: Redis) {
    this.#redis = redis;
  }

  /** Queues one message; resolves once the PUBLISH carrying it was acknowledged by Redis. */
  send(channel: string, completionId: string, messageJson: string): Promise<void> {
    let batch = this.#batches.get(channel);
    if (!batch) {
      let resolve!: () => void;
      let reject!: (error: unknown) => void;
      const sent = new Promise<void>((res, rej) => {
        resolve = res;
        reject = rej;
      });
      batch = { entries: [], sent, resolve, reject };
      this.#batches.set(channel, batch);
    }
    batch.entries.push(encodeReplyEntry(completionId, messageJson));
    if (!this.#scheduled) {
      this.#scheduled = true;
      setImmediate(() => this.#flush());
    }
    return batch.sent;
  }

  #flush(): void {
    this.#scheduled = false;
    const batches = [...this.#batches];
    this.#batches.clear();
    for (const [channel, batch] of batches) {
      this.#redis.publish(channel, encodeReplyBatch(batch.entries)).then(() => batch.resolve(), batch.reject);
    }
  }
}
