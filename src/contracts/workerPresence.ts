import type { Redis } from "../redis/createRedis.ts";
import type { InferenceKeys } from "./inferenceKeys.ts";

/**
 * Which models have a live worker. Workers beat into a sorted set per model (member = worker id,
 * score = when the beat expires); a model is live while one score is in the future.
 */
export class WorkerPresence {
  readonly #redis: Redis;
  readonly #keys: InferenceKeys;
  readonly #now: () => number;

  constructor(redis: Redis, keys: InferenceKeys, now: () => number = Date.now) {
    this.#redis = redis;
    this.#keys = keys;
    this.#now = now;
  }

  async isLive(modelId: string): Promise<boolean> {
    return (await this.#redis.zcount(this.#keys.modelWorkers(modelId), this.#now(), "+inf")) > 0;
  }

  /** The subset of `modelIds` with a live worker, in the given order. */
  async liveModels(modelIds: string[]): Promise<string[]> {
    if (modelIds.length === 0) return [];
    const now = this.#now();
    // One command per model, all issued at once (not a pipeline: in a Redis Cluster the models' keys
    // live on different slots). A failed read (Redis away) is an error, not "no live worker".
    const counts = await Promise.all(modelIds.map((id) => this.#redis.zcount(this.#keys.modelWorkers(id), now, "+inf")));
    return modelIds.filter((_, i) => (counts[i] ?? 0) > 0);
  }

  async beat(modelId: string, workerId: string, ttlMs: number): Promise<void> {
    const now = this.#now();
    const key = this.#keys.modelWorkers(modelId);
    await this.#redis
      .multi()
      .zadd(key, now + ttlMs, workerId)
      .zremrangebyscore(key, "-inf", now)
      .pexpire(key, ttlMs * 2)
      .exec();
  }

  async leave(modelId: string, workerId: string): Promise<void> {
    await this.#redis.zrem(this.#keys.modelWorkers(modelId), workerId);
  }
}
