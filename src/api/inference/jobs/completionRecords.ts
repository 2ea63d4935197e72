import { z } from "zod";
import type { DeltaMessage } from "../../../contracts/deltaMessage.ts";
import { EndpointSchema } from "../../../contracts/completionJob.ts";
import type { ApiPresence } from "../../../contracts/apiPresence.ts";
import { countListeners, listenerField } from "../../../contracts/completionListeners.ts";
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

// The record with one listener (the request that enqueued it, through ARGV[3]'s process) and its expiry,
// in one command on its one key.
const CREATE = `
redis.call('HSET', KEYS[1], 'meta', ARGV[1], ARGV[3], '1')
redis.call('EXPIRE', KEYS[1], ARGV[2])
return 1
`;

// The record written again after Redis lost it (restarted empty), with this process's listeners: nothing
// when it is there (a reconnect that lost nothing). A hash without `meta` is one a listener count made
// after the loss (HINCRBY creates it): its count of this process is replaced by the one known here.
const RESTORE = `
if redis.call('HEXISTS', KEYS[1], 'meta') == 1 then return 0 end
redis.call('HSET', KEYS[1], 'meta', ARGV[1], ARGV[3], ARGV[4])
redis.call('EXPIRE', KEYS[1], ARGV[2])
return 1
`;

type Scripts = {
  rmCompletionRecord(key: string, meta: string, retentionSeconds: number, listenerField: string): Promise<number>;
  rmRestoreCompletionRecord(key: string, meta: string, retentionSeconds: number, listenerField: string, listeners: number): Promise<number>;
};

/**
 * The completions of the last `retentionSeconds` (InferenceKeys.completionRecord): written when the job
 * is enqueued, with the number of clients listening to it through each API process (this one's is
 * `process`, its reply channel), which the abandonment watches read (completionListeners.ts).
 */
export class CompletionRecords {
  readonly #redis: Redis;
  readonly #scripts: Scripts;
  readonly #keys: InferenceKeys;
  readonly #retentionSeconds: number;
  readonly #field: string;
  readonly #presence: ApiPresence;
  readonly #now: () => number;

  constructor(redis: Redis, keys: InferenceKeys, retentionSeconds: number, listening: { process: string; presence: ApiPresence; now?: () => number }) {
    this.#redis = redis;
    this.#keys = keys;
    this.#retentionSeconds = retentionSeconds;
    this.#field = listenerField(listening.process);
    this.#presence = listening.presence;
    this.#now = listening.now ?? Date.now;
    redis.defineCommand("rmCompletionRecord", { numberOfKeys: 1, lua: CREATE });
    redis.defineCommand("rmRestoreCompletionRecord", { numberOfKeys: 1, lua: RESTORE });
    this.#scripts = redis as unknown as Scripts;
  }

  /**
   * Stores the record with one listener (the request that enqueued it) and its expiry: one script on the
   * record's key (one command instead of HSET and EXPIRE; atomic, so not even a Redis crash leaves a
   * record without its expiry; no MULTI, whose ioredis Pipeline copies every Lua command BullMQ defined
   * on this shared connection). Readers see the record whole or not at all.
   */
  async create(record: CompletionRecord): Promise<void> {
    await this.#scripts.rmCompletionRecord(this.#keys.completionRecord(record.completionId), JSON.stringify(record), this.#retentionSeconds, this.#field);
  }

  /**
   * Writes the record again, with `listeners` clients of this process, unless it is there: after a loss
   * of Redis, for a completion this process's clients still listen to (FollowedRecords). Returns whether
   * it was missing.
   */
  async restore(record: CompletionRecord, listeners: number): Promise<boolean> {
    const key = this.#keys.completionRecord(record.completionId);
    return (await this.#scripts.rmRestoreCompletionRecord(key, JSON.stringify(record), this.#retentionSeconds, this.#field, listeners)) === 1;
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

  /** One more client listens through this process (a resume); returns how many listen through it now. */
  async attach(completionId: string): Promise<number> {
    return this.#redis.hincrby(this.#keys.completionRecord(completionId), this.#field, 1);
  }

  /** A client of this process stopped listening before the end; returns how many still listen through it. */
  async detach(completionId: string): Promise<number> {
    return this.#redis.hincrby(this.#keys.completionRecord(completionId), this.#field, -1);
  }

  /** Clients listening now, through any API process still running. */
  async listeners(completionId: string): Promise<number> {
    const [fields, expiries] = await Promise.all([this.#redis.hgetall(this.#keys.completionRecord(completionId)), this.#presence.expiries()]);
    return countListeners(fields, expiries, this.#now()).live;
  }

  /** The last message of the completion's replay stream (undefined when it has none yet). */
  async lastMessage(completionId: string): Promise<DeltaMessage | undefined> {
    return firstDecoded(await this.#redis.xrevrange(this.#keys.replayStream(completionId), "+", "-", "COUNT", ENTRIES_READ));
  }

  /** The first message of the completion's replay stream (its seq is 0 unless its start was lost with Redis). */
  async firstMessage(completionId: string): Promise<DeltaMessage | undefined> {
    return firstDecoded(await this.#redis.xrange(this.#keys.replayStream(completionId), "-", "+", "COUNT", ENTRIES_READ));
  }

  /** Drops the record of a completion that never was one for its client (its admission refused): a GET of its id is a 404. */
  async forget(completionId: string): Promise<void> {
    await this.#redis.del(this.#keys.completionRecord(completionId));
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

/**
 * Entries read to find a first or last message: a replay stream also holds the claims of the runs that
 * took its job over (ReplayFence, not messages), one per run, and a job runs at most a few times.
 */
const ENTRIES_READ = 4;

/** The first entry of `entries` that is a message. */
function firstDecoded(entries: [string, string[]][]): DeltaMessage | undefined {
  for (const [, fields] of entries) {
    const message = decodeReplayEntry(fields);
    if (message) return message;
  }
  return undefined;
}
