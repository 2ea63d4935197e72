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
}
