import { z } from "zod";
import type { DeltaMessage } from "../../../contracts/deltaMessage.ts";
import { EndpointSchema } from "../../../contracts/completionJob.ts";
import type { InferenceKeys } from "../../../contracts/inferenceKeys.ts";
import { decodeReplayEntry, encodeReplyBatch, encodeReplyEntry } from "../../../contracts/replyBatch.ts";
import type { Redis } from "../../../redis/createRedis.ts";

/** What the API keeps of a completion it enqueued, for its owner's later reads, resumes and cancels. */
export const CompletionRecordSchema = z.object({
  completionId: z.string(),
  accountId: z.string(),
  model: z.string(),
  endpoint: EndpointSchema,
  created: z.number().int(),
  /** Reasoning model: usage shows reasoning tokens apart. */
  reasoning: z.boolean(),
  /** The reply channel of the API process that enqueued it. */
  replyTo: z.string(),
  /** The request's stream_options.include_usage: a resumed stream keeps it (usage: null on chunks, the usage chunk). */
  includeUsage: z.boolean().optional(),
});
export type CompletionRecord = z.infer<typeof CompletionRecordSchema>;

/**
 * The completions of the last `retentionSeconds` (InferenceKeys.completionRecord): written when the job
 * is enqueued, with the number of clients listening to it, which the abandonment watch reads.
 */
export class CompletionRecords {
  readonly #redis: Redis;
  readonly #keys: InferenceKeys;
  readonly #retentionSeconds: number;

  constructor(redis: Redis, keys: InferenceKeys, retentionSeconds: number) {
    this.#redis = redis;
    this.#keys = keys;
    this.#retentionSeconds = retentionSeconds;
  }

  /**
   * Stores the record with one listener (the request that enqueued it), then its expiry: two commands
   * issued together (one socket write when the caller corks the connection), not a MULTI. The record is
   * whole from the first (one HSET), so no reader sees half of it; what MULTI would add is only that
   * a Redis crash between the two cannot leave a record without its expiry, and it costs an ioredis
   * Pipeline per request (which copies every Lua command BullMQ defined on this shared connection).
   */
  async create(record: CompletionRecord): Promise<void> {
    const key = this.#keys.completionRecord(record.completionId);
    await Promise.all([this.#redis.hset(key, "meta", JSON.stringify(record), "listeners", "1"), this.#redis.expire(key, this.#retentionSeconds)]);
  }

  async find(completionId: string): Promise<CompletionRecord | null> {
    const text = await this.#redis.hget(this.#keys.completionRecord(completionId), "meta");
    if (!text) return null;
    try {
      const parsed = CompletionRecordSchema.safeParse(JSON.parse(text));
      return parsed.success ? parsed.data : null;
    } catch {
      return null;
    }
  }

  /** One more client listens (a resume); returns how many listen now. */
  async attach(completionId: string): Promise<number> {
    return this.#redis.hincrby(this.#keys.completionRecord(completionId), "listeners", 1);
  }

  /** A client stopped listening before the end; returns how many still listen. */
  async detach(completionId: string): Promise<number> {
    return this.#redis.hincrby(this.#keys.completionRecord(completionId), "listeners", -1);
  }

  async listeners(completionId: string): Promise<number> {
    return Number((await this.#redis.hget(this.#keys.completionRecord(completionId), "listeners")) ?? 0);
  }

  /** The last message of the completion's replay stream (undefined when it has none yet). */
  async lastMessage(completionId: string): Promise<DeltaMessage | undefined> {
    const entries = await this.#redis.xrevrange(this.#keys.replayStream(completionId), "+", "-", "COUNT", 1);
    const fields = entries[0]?.[1];
    return fields ? decodeReplayEntry(fields) : undefined;
  }

  /** The first message of the completion's replay stream (its seq is 0 unless its start was lost with Redis). */
  async firstMessage(completionId: string): Promise<DeltaMessage | undefined> {
    const entries = await this.#redis.xrange(this.#keys.replayStream(completionId), "-", "+", "COUNT", 1);
    const fields = entries[0]?.[1];
    return fields ? decodeReplayEntry(fields) : undefined;
  }

  /** Drops the completion's replay stream: its job is run again afresh under the same id (a batch line whose run was lost). */
  async discardReplay(completionId: string): Promise<void> {
    await this.#redis.del(this.#keys.replayStream(completionId));
  }

  /**
   * Ends a completion that never ran (taken off the queue before a worker started it) with `message`:
   * appended to its replay stream as its only message and published to the API process that waits for it.
   */
  async endUnstarted(record: CompletionRecord, message: DeltaMessage): Promise<void> {
    const stream = this.#keys.replayStream(record.completionId);
    const json = JSON.stringify(message);
    await this.#redis
      .multi()
      .xadd(stream, "*", "m", json)
      .expire(stream, this.#retentionSeconds)
      .publish(record.replyTo, encodeReplyBatch([encodeReplyEntry(record.completionId, json)]))
      .exec();
  }
}
