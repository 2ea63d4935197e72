import { Redis } from "ioredis";

export type { Redis };

/**
 * A Redis connection. `maxRetriesPerRequest: null` is what BullMQ requires for its blocking
 * connections; plain command connections use the same settings for simplicity.
 */
export function createRedis(url: string, options: { lazyConnect?: boolean } = {}): Redis {
  const redis = new Redis(url, {
    maxRetriesPerRequest: null,
    enableReadyCheck: true,
    lazyConnect: options.lazyConnect ?? false,
  });
  redis.on("error", () => undefined);
  return redis;
}
