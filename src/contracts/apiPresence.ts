import type { Redis } from "../redis/createRedis.ts";
import type { InferenceKeys } from "./inferenceKeys.ts";

/** A process's beat is forgotten this long after it expired (its clients' completions ended long before). */
const FORGOTTEN_AFTER_MS = 60 * 60_000;

/**
 * Which API processes are running: each beats into one sorted set (member = its reply channel, score =
 * when the beat expires). A process killed stops beating; its member stays, expired, for an hour, so a
 * reader knows when it stopped (the clients it held went with it). Read by whoever counts a completion's
 * listeners (CompletionRecords, the worker's AbandonedJobWatch).
 */
export class ApiPresence {
  readonly #redis: Redis;
  readonly #keys: InferenceKeys;
  readonly #now: () => number;

  constructor(redis: Redis, keys: InferenceKeys, now: () => number = Date.now) {
    this.#redis = redis;
    this.#keys = keys;
    this.#now = now;
  }

  async beat(process: string, ttlMs: number): Promise<void> {
    const now = this.#now();
    const key = this.#keys.apiProcesses();
    await this.#redis
      .multi()
      .zadd(key, now + ttlMs, process)
      .zremrangebyscore(key, "-inf", now - FORGOTTEN_AFTER_MS)
      .pexpire(key, FORGOTTEN_AFTER_MS + ttlMs)
      .exec();
  }

  /** Every process that beat within the last hour -> when its beat expires (in the future: running). */
  async expiries(): Promise<Map<string, number>> {
    const flat = await this.#redis.zrange(this.#keys.apiProcesses(), "0", "-1", "WITHSCORES");
    const expiries = new Map<string, number>();
    for (let i = 0; i + 1 < flat.length; i += 2) expiries.set(flat[i]!, Number(flat[i + 1]));
    return expiries;
  }
}
