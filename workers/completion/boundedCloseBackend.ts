import { type BackendFactory, createRedisBackend, type RedisQueueBackend } from "bullmq";
import { within } from "./settledWithin.ts";

/** How long a BullMQ worker's close waits for one of its connections to report itself closed (see below). */
export const CONNECTION_CLOSE_GRACE_MS = 2_000;

/**
 * BullMQ's Redis backend (`createRedisBackend`, through BullMQ's public `BackendFactory` extension point)
 * with the connection teardowns a `Worker.close()` awaits bounded in time, so that a worker closed just
 * after Redis came back closes.
 *
 * A graceful `Worker.close()` interrupts the worker's blocking fetch by disconnecting its blocking
 * connection and waits for that connection's `end` event, then for its fetch loop, then quits both
 * connections. An ioredis client told to disconnect while it waits to reconnect (Redis restarted or
 * away a moment before) drops its reconnect timer but never emits `end` nor connects again (ioredis
 * #1830, BullMQ #4656; no release fixes it yet), so the close, and with it the worker role's stop, hung
 * for ever: on the `end`, then on the fetch loop's attempt to reconnect that client (BullMQ's watchdog
 * ends the fetch itself within its block timeout plus a second), then on a QUIT left in the client's
 * offline queue.
 *
 * Such a client holds no socket and no timer any more, so nothing is lost by not waiting for it:
 * - interrupting the blocking fetch waits at most `graceMs`;
 * - once `closing()` says the worker is closing, the blocking connection is not reconnected and no job
 *   is taken any more (BullMQ takes one after a fetch its watchdog ended, on the other connection, which
 *   waits for Redis while it is away);
 * - closing the connections waits at most `graceMs`, then disconnects them forcibly (again waiting at
 *   most `graceMs`).
 * A healthy connection ends in milliseconds, so an ordinary close is unchanged, and BullMQ still lets the
 * running jobs finish and stops its lock renewal and stalled check as in any close.
 */
export function boundedCloseBackend(closing: () => boolean, graceMs: number = CONNECTION_CLOSE_GRACE_MS): BackendFactory<RedisQueueBackend> {
  return (name, opts, options) => {
    const backend = createRedisBackend(name, opts, options);
    const disconnectBlocking = backend.disconnectBlocking.bind(backend);
    const reconnectBlocking = backend.reconnectBlocking.bind(backend);
    const close = backend.close.bind(backend);
    const disconnect = backend.disconnect.bind(backend);
    const moveToActive = backend.moveToActive.bind(backend);
    const settle = async (promise: Promise<void>): Promise<boolean> => {
      const outcome = await within(promise, graceMs);
      if (outcome.kind === "rejected") throw outcome.error;
      return outcome.kind === "resolved";
    };
    backend.disconnectBlocking = async (wait?: boolean) => {
      await settle(disconnectBlocking(wait));
    };
    backend.reconnectBlocking = async () => {
      if (!closing()) await reconnectBlocking();
    };
    // A closing worker takes no more jobs: the backend's own answer when none is ready.
    backend.moveToActive = async (token: string, name?: string) => (closing() ? [] : moveToActive(token, name));
    backend.close = async (force?: boolean) => {
      if (!(await settle(close(force)))) await settle(disconnect());
    };
    return backend;
  };
}
