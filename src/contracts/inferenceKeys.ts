/**
 * Names of everything the inference path keeps in Redis, all under the deployment's prefix (tests use a
 * unique one). BullMQ queues use the same prefix through its `prefix` option.
 *
 * Redis Cluster rule: every command (and every MULTI or BullMQ script) touches keys of ONE hash slot.
 * A BullMQ queue's keys are used together in its scripts, so the queue name is a hash tag (`{model-x}`:
 * each model's queue on a slot of its own, spread over the masters). Every other key here is used by
 * single-key commands only (a MULTI touches one key; PUBLISH has no key), so it needs no tag and no
 * key names another's slot. The prefix carries no braces (the configuration refuses them), so the
 * first `{...}` of a key is always the tag put here. Pub/sub channels are not keys: PUBLISH reaches
 * subscribers on every node of a cluster.
 */
export class InferenceKeys {
  readonly prefix: string;

  constructor(prefix: string) {
    this.prefix = prefix;
  }

  /**
   * BullMQ queue name of a model (queue names must not contain ':'), a hash tag: all keys of the queue
   * (`<prefix>:{model-x}:wait`, `...:active`, the jobs) hash to one slot of a Redis Cluster.
   */
  queueName(modelId: string): string {
    return `{model-${modelId}}`;
  }

  /** Sorted set: worker id -> expiry (ms since epoch) of its last heartbeat for the model (read one key per command). */
  modelWorkers(modelId: string): string {
    return `${this.prefix}:workers:${modelId}`;
  }

  /** Sorted set: API process (its reply channel) -> expiry (ms since epoch) of its last beat (ApiPresence). */
  apiProcesses(): string {
    return `${this.prefix}:apis`;
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
   * A cancel of a running job, as published on cancelChannel, kept for a while: a worker whose
   * subscription was away when it was published (Redis restarted or the connection dropped) reads it
   * once it is back, before it charges the job (JobCancellations).
   */
  cancelMark(completionId: string): string {
    return `${this.prefix}:cancelled:${completionId}`;
  }

  /**
   * Hash of one completion, kept as long as its replay stream: `meta` (owner, model, endpoint, created:
   * CompletionRecord) written by the API at enqueue, `listeners:<API process>` (clients attached now
   * through that process, for the grace period of abandoned work: completionListeners.ts).
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
