import { z } from "zod";
import { duplicateAs, type Redis } from "../redis/createRedis.ts";
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

/** For processes without an API cache of their own (e.g. the admin CLI): tell every API process. */
export async function publishAuthInvalidation(redis: Redis, redisPrefix: string, message: AuthInvalidation): Promise<void> {
  await redis.publish(authInvalidationChannel(redisPrefix), JSON.stringify(AuthInvalidationSchema.parse(message)));
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
    const connection = duplicateAs(redis, "subscriber");
    this.#connection = connection;
    connection.on("error", (error: Error) => logger.warn("auth invalidation subscriber error", { error: error.message }));
    connection.on("ready", () => onResync());
    connection.on("message", (from: string, raw: string) => {
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
    await connection.subscribe(channel);
  }

  async stop(): Promise<void> {
    const connection = this.#connection;
    this.#connection = null;
    if (!connection) return;
    await connection.quit().catch(() => connection.disconnect());
  }
}
