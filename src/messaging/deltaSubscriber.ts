import { createRedis, type Redis } from "./createRedis.ts";
import { CompletionFeed } from "./completionFeed.ts";
import { DeltaMessageSchema, type DeltaMessage } from "./deltaMessage.ts";
import type { InferenceKeys } from "./inferenceKeys.ts";

/**
 * The one Redis subscriber connection of an API process. Each running completion has a feed; incoming
 * messages are dispatched to it by channel. Never one connection per request.
 */
export class DeltaSubscriber {
  readonly #subscriber: Redis;
  readonly #commands: Redis;
  readonly #keys: InferenceKeys;
  readonly #feeds = new Map<string, CompletionFeed>();

  /** `commands` is a normal connection (for replay reads); the subscriber connection is created here. */
  constructor(redisUrl: string, commands: Redis, keys: InferenceKeys) {
    this.#subscriber = createRedis(redisUrl);
    this.#commands = commands;
    this.#keys = keys;
    this.#subscriber.on("message", (channel: string, text: string) => this.#dispatch(channel, text));
  }

  /** Number of completions being listened to (for tests and metrics). */
  get listening(): number {
    return this.#feeds.size;
  }

  /** Subscribes to a completion's channel; resolves once Redis confirmed, so nothing published later is missed. */
  async open(completionId: string): Promise<CompletionFeed> {
    const channel = this.#keys.deltaChannel(completionId);
    const feed = new CompletionFeed(
      completionId,
      (id) => this.replay(id),
      () => {
        if (this.#feeds.get(channel) === feed) this.#feeds.delete(channel);
        this.#subscriber.unsubscribe(channel).catch(() => undefined);
      },
    );
    this.#feeds.set(channel, feed);
    try {
      await this.#subscriber.subscribe(channel);
    } catch (error) {
      feed.close();
      throw error;
    }
    return feed;
  }

  /** Every message of a completion still in its replay stream, in order. */
  async replay(completionId: string): Promise<DeltaMessage[]> {
    const entries = await this.#commands.xrange(this.#keys.replayStream(completionId), "-", "+");
    const messages: DeltaMessage[] = [];
    for (const [, fields] of entries) {
      const json = fields[fields.indexOf("m") + 1];
      const parsed = json === undefined ? undefined : parseMessage(json);
      if (parsed) messages.push(parsed);
    }
    return messages;
  }

  async close(): Promise<void> {
    for (const feed of [...this.#feeds.values()]) feed.close();
    this.#subscriber.disconnect();
  }

  #dispatch(channel: string, text: string): void {
    const feed = this.#feeds.get(channel);
    if (!feed) return;
    const message = parseMessage(text);
    if (message) feed.push(message);
  }
}

function parseMessage(text: string): DeltaMessage | undefined {
  try {
    const result = DeltaMessageSchema.safeParse(JSON.parse(text));
    return result.success ? result.data : undefined;
  } catch {
    return undefined;
  }
}
