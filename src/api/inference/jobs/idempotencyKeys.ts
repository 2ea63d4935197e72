import { createHash } from "node:crypto";
import { retryWhileAway, UNDO_RETRY } from "../../../redis/retryWhileAway.ts";
import { z } from "zod";
import type { InferenceKeys } from "../../../contracts/inferenceKeys.ts";
import type { Redis } from "../../../redis/createRedis.ts";
import { InvalidRequestError } from "../../http/errors.ts";

/** Deletes the claim if it names the completion (ARGV[1]: its id as JSON text). */
const RELEASE_IF_NAMED = `
local claim = redis.call('GET', KEYS[1])
if claim and string.find(claim, ARGV[1], 1, true) then return redis.call('DEL', KEYS[1]) end
return 0
`;

type ReleaseScript = { rmReleaseIdempotencyClaim(key: string, namedId: string): Promise<number> };

const ClaimSchema = z.object({ completionId: z.string(), bodyHash: z.string() });
export type IdempotencyClaim = { won: true } | { won: false; completionId: string; bodyHash: string };

/** An Idempotency-Key header: 1-255 visible ASCII characters (it names a request; it is stored hashed). */
export function parseIdempotencyKey(header: string | undefined): string | null {
  if (header === undefined || header === "") return null;
  if (header.length > 255 || !/^[\x21-\x7e]+$/.test(header)) {
    throw new InvalidRequestError("The Idempotency-Key header must be 1 to 255 visible ASCII characters.", {
      param: "Idempotency-Key",
      code: "invalid_idempotency_key",
    });
  }
  return header;
}

/**
 * A hash of what makes two requests the same one: the endpoint and the validated body, without `stream`
 * and `stream_options` (a retry may ask for the same completion streamed or whole).
 */
export function requestHash(endpoint: string, body: unknown): string {
  const { stream: _stream, stream_options: _options, ...rest } = body as Record<string, unknown>;
  return createHash("sha256").update(endpoint).update("\0").update(JSON.stringify(rest)).digest("hex");
}

/**
 * Idempotency-Key records, per API key, for `ttlSeconds`: the first request with a key claims it for its
 * completion; a retry with the same key and body attaches to that completion instead of starting (and
 * charging) another; the same key with another body is refused. A request that fails before its job is
 * queued gives its claim back, so a retry starts afresh.
 */
export class IdempotencyKeys {
  readonly #redis: Redis;
  readonly #keys: InferenceKeys;
  readonly #ttlSeconds: number;
  readonly #scripts: ReleaseScript;

  constructor(redis: Redis, keys: InferenceKeys, ttlSeconds: number) {
    this.#redis = redis;
    this.#keys = keys;
    this.#ttlSeconds = ttlSeconds;
    redis.defineCommand("rmReleaseIdempotencyClaim", { numberOfKeys: 1, lua: RELEASE_IF_NAMED });
    this.#scripts = redis as unknown as ReleaseScript;
  }

  async claim(keyId: string, idempotencyKey: string, bodyHash: string, completionId: string): Promise<IdempotencyClaim> {
    const key = this.#recordKey(keyId, idempotencyKey);
    try {
      for (let attempt = 0; attempt < 3; attempt++) {
        const set = await this.#redis.set(key, JSON.stringify({ completionId, bodyHash }), "EX", this.#ttlSeconds, "NX");
        if (set === "OK") return { won: true };
        const existing = await this.#redis.get(key);
        if (existing === null) continue; // given back meanwhile: claim again
        const parsed = ClaimSchema.safeParse(JSON.parse(existing));
        if (parsed.success) return { won: false, ...parsed.data };
        await this.#redis.del(key);
      }
      throw new Error("could not claim an idempotency key");
    } catch (error) {
      // No answer (Redis stalled or away): the SET may still run once Redis answers again, and hold the
      // key for a completion that never was: a retry with it (as the SDKs send after a 503) would wait
      // for that completion to start. It is given back behind it, on the same connection.
      void retryWhileAway(() => this.release(keyId, idempotencyKey, completionId), UNDO_RETRY);
      throw error;
    }
  }

  /**
   * Gives a claim back (its request failed before its job was queued), only while it still names that
   * completion: one script, compare and delete. (A GET, then a DEL: two processes giving back the same
   * claim at a shutdown, one of them re-claiming it for its new run in between, had the other delete the
   * new claim: a third retry ran and was charged again.)
   */
  async release(keyId: string, idempotencyKey: string, completionId: string): Promise<void> {
    await this.#scripts.rmReleaseIdempotencyClaim(this.#recordKey(keyId, idempotencyKey), JSON.stringify(completionId));
  }

  /** Whether the claim still names the completion (false once given back). */
  async stillClaimed(keyId: string, idempotencyKey: string, completionId: string): Promise<boolean> {
    return (await this.#redis.get(this.#recordKey(keyId, idempotencyKey)))?.includes(JSON.stringify(completionId)) ?? false;
  }

  #recordKey(keyId: string, idempotencyKey: string): string {
    return this.#keys.idempotencyRecord(keyId, createHash("sha256").update(idempotencyKey).digest("hex"));
  }
}
