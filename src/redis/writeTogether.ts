import type { Socket } from "node:net";
import { isCluster, type Redis } from "./createRedis.ts";

/**
 * Corks the connection's socket (when it is writable), so that every command issued on it from now to
 * the end of the current event-loop turn (setImmediate) reaches Redis in one socket write instead of one
 * write each; `last` runs at the end of the turn, right before the socket is uncorked, and its commands
 * leave with the others. Nothing waits longer than the current turn, and the socket is uncorked whatever
 * `last` does. A connection that is not writable (connecting, away) is left alone: ioredis holds or
 * refuses its commands as usual. A Redis Cluster client is left alone too.
 */
export function writeTogetherThisTurn(redis: Redis, last: () => void): void {
  // A cluster client writes to one socket per node: nothing to cork (each node gets its commands as issued).
  const socket = isCluster(redis) ? undefined : (redis.stream as Socket | undefined);
  const corked = socket?.writable ? socket : null;
  corked?.cork();
  setImmediate(() => {
    try {
      last();
    } finally {
      corked?.uncork();
    }
  });
}

/**
 * Runs `issue` with the connection's socket corked, so that the commands it issues (ioredis writes a
 * command to the socket when it is sent) leave in one socket write when it returns, with no wait: one
 * write system call instead of one per command. A connection that is not writable, or a Redis Cluster
 * client, is left alone (as writeTogetherThisTurn).
 */
export function writeTogetherNow<T>(redis: Redis, issue: () => T): T {
  const socket = isCluster(redis) ? undefined : (redis.stream as Socket | undefined);
  const corked = socket?.writable ? socket : null;
  corked?.cork();
  try {
    return issue();
  } finally {
    corked?.uncork();
  }
}
