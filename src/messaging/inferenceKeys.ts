/**
 * Names of everything the inference path keeps in Redis, all under the deployment's prefix (tests use a
 * unique one). BullMQ queues use the same prefix through its `prefix` option.
 */
export class InferenceKeys {
  readonly prefix: string;

  constructor(prefix: string) {
    this.prefix = prefix;
  }

  /** BullMQ queue name of a model (queue names must not contain ':'). */
  queueName(modelId: string): string {
    return `model-${modelId}`;
  }

  /** Sorted set: worker id -> expiry (ms since epoch) of its last heartbeat for the model. */
  modelWorkers(modelId: string): string {
    return `${this.prefix}:workers:${modelId}`;
  }

  /** Pub/sub channel carrying a completion's live delta messages. */
  deltaChannel(completionId: string): string {
    return `${this.prefix}:deltas:${completionId}`;
  }

  /** Capped, expiring stream with the same messages, for replay (Last-Event-ID) and gap filling. */
  replayStream(completionId: string): string {
    return `${this.prefix}:replay:${completionId}`;
  }

  /** Channel pattern prefix, to recover the completion id from a channel name. */
  completionIdOfChannel(channel: string): string | undefined {
    const head = `${this.prefix}:deltas:`;
    return channel.startsWith(head) ? channel.slice(head.length) : undefined;
  }
}
