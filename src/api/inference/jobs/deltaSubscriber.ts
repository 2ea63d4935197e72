import { randomUUID } from "node:crypto";
import { duplicateAs, redisAway, type Redis } from "../../../redis/createRedis.ts";
import { CompletionFeed, DEFAULT_FEED_RECOVERY } from "./completionFeed.ts";
import type { DeltaMessage } from "../../../contracts/deltaMessage.ts";
import type { InferenceKeys } from "../../../contracts/inferenceKeys.ts";
import type { LocalReplyChannels } from "../../../contracts/localReplyChannels.ts";
import { decodeReplayEntries, decodeReplyBatch, type ReplyEntry } from "../../../contracts/replyBatch.ts";

export type DeltaSubscriberOptions = {
  /** Names the reply channel (default: a random id). */
  listenerId?: string;
  /**
   * The reply channels of this process's API roles: the subscriber registers its own there, and a worker
   * of this process hands it the messages of its jobs directly instead of publishing them.
   */
  local?: LocalReplyChannels;
};

/**
 * The one Redis subscriber connection of an API process, subscribed once to the process's own reply
 * channel (`replyTo`, carried by every job this process enqueues). Workers of other processes publish
 * batches of messages of many completions there; a worker of this process hands its batches over in
 * process (LocalReplyChannels), already decoded. Each message is dispatched to its completion's feed.
 * Nothing is subscribed or unsubscribed per request: opening a feed costs no Redis round trip.
 */
export class DeltaSubscriber {
  /** The channel workers publish this process's replies to. */
  readonly replyTo: string;
  /** Resolves once Redis confirmed the subscription (rejects if it failed): await it before enqueueing. */
  readonly ready: Promise<void>;
  readonly #subscriber: Redis;
  readonly #commands: Redis;
  readonly #keys: InferenceKeys;
  readonly #feeds = new Map<string, CompletionFeed>();
  readonly #reconnected: (() => void)[] = [];
  #connections = 0;
  readonly #unregister: () => void;

  /** `commands` is a normal connection (for replay reads); the subscriber connection (to the same server) is created here. */
  constructor(commands: Redis, keys: InferenceKeys, options: DeltaSubscriberOptions = {}) {
    this.#subscriber = duplicateAs(commands, "subscriber");
    this.#commands = commands;
    this.#keys = keys;
    this.replyTo = keys.replyChannel(options.listenerId ?? randomUUID());
    this.#subscriber.on("message", (_channel: string, text: string) => this.#dispatch(decodeReplyBatch(text)));
    this.#unregister = options.local?.register(this.replyTo, (entries) => this.#dispatch(entries)) ?? (() => undefined);
    this.#subscriber.on("ready", () => {
      this.#connections++;
    });
    // ioredis subscribes again by itself after a reconnect; what was published meanwhile is refilled
    // from the replay streams by the feeds (a gap in the sequence, or silence).
    this.ready = this.#subscriber.subscribe(this.replyTo).then(() => undefined);
    this.ready.catch(() => undefined);
    let connected = false;
    this.#subscriber.on("ready", () => {
      if (connected) {
        // Whatever was published while the subscriber was away is missed: every feed reads its replay stream.
        for (const feed of this.#feeds.values()) feed.recover();
        for (const listener of this.#reconnected) listener();
      }
      connected = true;
    });
  }

  /** Calls `listener` each time the connection to Redis is back after a loss (not on the first connect). */
  onReconnect(listener: () => void): void {
    this.#reconnected.push(listener);
  }

  /** Whether the subscriber connection is down after having been up (replies published meanwhile are missed). */
  get away(): boolean {
    return redisAway(this.#subscriber);
  }

  /** How many times the subscriber connection was (re)established: a change means replies may have been missed. */
  get connections(): number {
    return this.#connections;
  }

  /** Number of completions being listened to (for tests and metrics). */
  get listening(): number {
    return this.#feeds.size;
  }

  /** Starts collecting a completion's messages (call before enqueueing its job, after `ready`). */
  open(completionId: string, options: { lostAtOnce?: boolean } = {}): CompletionFeed {
    const feed = new CompletionFeed(
      completionId,
      (id) => this.replay(id),
      () => {
        if (this.#feeds.get(completionId) === feed) this.#feeds.delete(completionId);
      },
      options.lostAtOnce === false ? { ...DEFAULT_FEED_RECOVERY, lostAtOnce: false } : DEFAULT_FEED_RECOVERY,
    );
    this.#feeds.set(completionId, feed);
    return feed;
  }

  /** Closes a completion's feed, if it is open (its reader gets no more messages). */
  stopListening(completionId: string): void {
    this.#feeds.get(completionId)?.close();
  }

  /** Every message of a completion still in its replay stream, in order. */
  async replay(completionId: string): Promise<DeltaMessage[]> {
    return decodeReplayEntries(await this.#commands.xrange(this.#keys.replayStream(completionId), "-", "+"));
  }

  async close(): Promise<void> {
    this.#unregister();
    for (const feed of [...this.#feeds.values()]) feed.close();
    this.#subscriber.disconnect();
  }

  #dispatch(entries: readonly ReplyEntry[]): void {
    for (const { completionId, message } of entries) this.#feeds.get(completionId)?.push(message);
  }
}
