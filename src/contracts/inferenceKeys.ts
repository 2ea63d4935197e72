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

  /** Pub/sub channel of one API process: workers publish the messages of the jobs it enqueued there. */
  replyChannel(listenerId: string): string {
    return `${this.prefix}:replies:${listenerId}`;
  }

  /** Pub/sub channel every worker listens on: completion ids of jobs the API cancelled (admission refused). */
  cancelChannel(): string {
    return `${this.prefix}:cancel`;
  }

  /**
   * Hash of one completion, kept as long as its replay stream: `meta` (owner, model, endpoint, created:
   * CompletionRecord) written by the API at enqueue, `listeners` (clients attached now, for the grace
   * period of abandoned work).
   */
  completionRecord(completionId: string): string {
    return `${this.prefix}:completion:${completionId}`;
  }

  /** An Idempotency-Key of one API key (hashed): the completion it started and a hash of the request body. */
  idempotencyRecord(keyId: string, idempotencyKeyHash: string): string {
    return `${this.prefix}:idempotency:${keyId}:${idempotencyKeyHash}`;
  }

  /** Capped, expiring stream with the same messages, for replay (Last-Event-ID) and gap filling. */
  replayStream(completionId: string): string {
    return `${this.prefix}:replay:${completionId}`;
  }
}
