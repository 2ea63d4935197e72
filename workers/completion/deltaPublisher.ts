import type { Redis } from "../../src/messaging/createRedis.ts";
import type { DeltaMessage, UnsequencedDeltaMessage } from "../../src/messaging/deltaMessage.ts";
import type { InferenceKeys } from "../../src/messaging/inferenceKeys.ts";
import type { EngineDelta } from "../engines/engine.ts";
import type { CoalescingWindow } from "./coalescingWindow.ts";
import { mergeDeltas } from "./mergeDeltas.ts";

export type DeltaPublisherOptions = {
  /** The coalescing window, shared by the worker's publishers (it widens under load). */
  window: CoalescingWindow;
  replayTtlSeconds: number;
  replayMaxLen: number;
  now?: () => number;
};

/**
 * Writes one completion's messages to Redis, numbered 0, 1, 2, ...: PUBLISH to the completion's channel
 * for live listeners plus XADD to its capped, expiring replay stream, in one pipeline per message.
 *
 * Deltas are coalesced with a leading-edge throttle: a delta that comes a window or more after the
 * last write goes out at once (so the first token is never held back); later ones are merged and
 * written together when the window closes, so Redis is not written once per token under load.
 * Commands go out on an auto-pipelining connection: one socket write per event-loop tick for all
 * completions of the worker, without building a pipeline object per message.
 */
export class DeltaPublisher {
  readonly #redis: Redis;
  readonly #channel: string;
  readonly #stream: string;
  readonly #options: Required<DeltaPublisherOptions>;
  #seq = 0;
  #lastWrite = Number.NEGATIVE_INFINITY;
  #pending: EngineDelta | null = null;
  #timer: NodeJS.Timeout | null = null;
  #writes: Promise<unknown>[] = [];
  #failure: Error | null = null;
  #closed = false;

  constructor(redis: Redis, keys: InferenceKeys, completionId: string, options: DeltaPublisherOptions) {
    this.#redis = redis;
    this.#channel = keys.deltaChannel(completionId);
    this.#stream = keys.replayStream(completionId);
    this.#options = { now: () => performance.now(), ...options };
    options.window.opened();
  }

  /** Number of messages written so far. */
  get written(): number {
    return this.#seq;
  }

  delta(delta: EngineDelta): void {
    if (this.#pending) {
      mergeDeltas(this.#pending, delta);
      return;
    }
    const now = this.#options.now();
    const wait = this.#lastWrite + this.#options.window.currentMs() - now;
    if (wait <= 0) {
      this.#write({ type: "delta", delta: mergeDeltas({}, delta) });
      this.#lastWrite = now;
      return;
    }
    this.#pending = mergeDeltas({}, delta);
    this.#timer = setTimeout(() => this.flush(), wait);
  }

  /** Writes the merged pending deltas now. */
  flush(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    const pending = this.#pending;
    if (!pending) return;
    this.#pending = null;
    this.#write({ type: "delta", delta: pending });
    this.#lastWrite = this.#options.now();
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
    const writes = this.#writes;
    this.#writes = [];
    await Promise.all(writes);
    if (this.#failure) throw this.#failure;
  }

  #write(message: UnsequencedDeltaMessage): void {
    const sequenced = { ...message, seq: this.#seq++ } as DeltaMessage;
    const json = JSON.stringify(sequenced);
    const redis = this.#redis;
    const commands: Promise<unknown>[] = [
      redis.publish(this.#channel, json),
      redis.xadd(this.#stream, "MAXLEN", "~", String(this.#options.replayMaxLen), "*", "m", json),
    ];
    // The expiry is (re)set on the first and last messages and now and then between, not on every delta.
    const last = sequenced.type === "usage" || sequenced.type === "error";
    if (sequenced.seq % 256 === 0 || last) commands.push(redis.expire(this.#stream, this.#options.replayTtlSeconds));
    const write = Promise.all(commands).catch((error: unknown) => {
      this.#failure ??= error as Error;
    });
    this.#writes.push(write);
    // Keep the list short on long generations: settled writes need no tracking.
    if (this.#writes.length > 256) this.#writes = this.#writes.slice(-64);
  }
}
