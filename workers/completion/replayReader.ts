import type { DeltaMessage } from "../../src/contracts/deltaMessage.ts";
import type { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import { decodeReplayEntries } from "../../src/contracts/replyBatch.ts";
import type { Redis } from "../../src/redis/createRedis.ts";

/**
 * Reads back what earlier runs of a job wrote to its completion's replay stream (InferenceKeys.replayStream),
 * in the order written: what the API received or can still fill its gaps from. A worker reads it before
 * running a job BullMQ handed out again after its worker died.
 */
export class ReplayReader {
  readonly #redis: Redis;
  readonly #keys: InferenceKeys;

  constructor(redis: Redis, keys: InferenceKeys) {
    this.#redis = redis;
    this.#keys = keys;
  }

  async read(completionId: string): Promise<DeltaMessage[]> {
    return decodeReplayEntries(await this.#redis.xrange(this.#keys.replayStream(completionId), "-", "+"));
  }

  /** The number of the first message the replay stream holds (a run's claim is no message), or null when it holds none yet. */
  async firstSeq(completionId: string): Promise<number | null> {
    const entries = await this.#redis.xrange(this.#keys.replayStream(completionId), "-", "+", "COUNT", 4);
    return decodeReplayEntries(entries)[0]?.seq ?? null;
  }
}
