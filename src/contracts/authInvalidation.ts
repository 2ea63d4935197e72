import { z } from "zod";
import { throttledWarning } from "../observability/throttledWarning.ts";
import { duplicateAs, isCluster, type Redis } from "../redis/createRedis.ts";
import type { Logger } from "../observability/logger.ts";

/**
 * Cross-process invalidation of the API-key auth cache over Redis pub/sub. A message names an account
 * (never a key, a hash or a secret); every API process drops that account's cached keys.
 */
export const AuthInvalidationSchema = z.object({ accountId: z.string().min(1) }).strict();
export type AuthInvalidation = z.infer<typeof AuthInvalidationSchema>;

export function authInvalidationChannel(redisPrefix: string): string {
  return `${redisPrefix}:auth-invalidate`;
}

/**
 * Tells every API process (also used by processes without an API cache of their own, e.g. the admin CLI).
 *
 * On a Redis Cluster the channel is sharded (SPUBLISH, SSUBSCRIBE): the channel's own master delivers the
 * message to its subscribers before it answers the publisher. A plain PUBLISH reaches subscribers on
 * other masters over the cluster bus, after the publisher's answer, so a key revoked through one API
 * process could still be accepted by another for a moment. On a single server PUBLISH already delivers
 * before it answers. Publisher and subscribers agree because both follow the connection's mode.
 */
export async function publishAuthInvalidation(redis: Redis, redisPrefix: string, message: AuthInvalidation): Promise<void> {
  const channel = authInvalidationChannel(redisPrefix);
  const payload = JSON.stringify(AuthInvalidationSchema.parse(message));
  if (isCluster(redis)) await redis.spublish(channel, payload);
  else await redis.publish(channel, payload);
}

export type AuthInvalidationSubscriberOptions = {
  redis: Redis;
  redisPrefix: string;
  logger: Logger;
  onInvalidate: (message: AuthInvalidation) => void;
  /** Called when the subscription (re)connects: messages may have been missed, so drop everything. */
  onResync: () => void;
};

/** One dedicated subscriber connection per API process (next to `redis`, which may fail fast; this one waits and re-subscribes). */
export class AuthInvalidationSubscriber {
  readonly #options: AuthInvalidationSubscriberOptions;
  #connection: Redis | null = null;

  constructor(options: AuthInvalidationSubscriberOptions) {
    this.#options = options;
  }

  async start(): Promise<void> {
    if (this.#connection) return;
    const { redis, redisPrefix, logger, onInvalidate, onResync } = this.#options;
    const channel = authInvalidationChannel(redisPrefix);
    // A sharded channel on a cluster (see publishAuthInvalidation): its subscriber connection is the
    // channel's master's, (re)made by ioredis after a failover ("+subscriber").
    const sharded = isCluster(redis);
    const connection = duplicateAs(redis, "subscriber", { shardedSubscribers: sharded });
    this.#connection = connection;
    const warn = throttledWarning(logger, "auth invalidation subscriber error");
    connection.on("error", (error: Error) => warn({ error: error.message }));
    connection.on("ready", () => onResync());
    if (sharded) connection.on("+subscriber", () => onResync());
    connection.on(sharded ? "smessage" : "message", (from: string, raw: string) => {
      if (from !== channel) return;
      let parsed: unknown;
      try {
        parsed = JSON.parse(raw);
      } catch {
        parsed = undefined;
      }
      const message = AuthInvalidationSchema.safeParse(parsed);
      if (!message.success) {
        logger.warn("ignored malformed auth invalidation message", { channel });
        return;
      }
      onInvalidate(message.data);
    });
    if (sharded) await connection.ssubscribe(channel);
    else await connection.subscribe(channel);
  }

  async stop(): Promise<void> {
    const connection = this.#connection;
    this.#connection = null;
    if (!connection) return;
    await connection.quit().catch(() => connection.disconnect());
  }
}
