import type { ReplyEntry } from "./replyBatch.ts";

/**
 * Takes the messages a worker of this process wrote in one event-loop turn for one reply channel, in
 * order, once Redis acknowledged their appends to the replay streams. Must not throw.
 */
export type LocalReplyHandler = (entries: readonly ReplyEntry[]) => void;

/**
 * The reply channels (InferenceKeys.replyChannel) of the API roles running in this process, one per
 * process, created by runRoles and handed to every role. A worker of the same process hands the
 * messages of a job whose `replyTo` is registered here straight to the API's handler, as the objects
 * it built (no PUBLISH, no JSON text, no decoding or validation: the contract is checked in tests);
 * every other reply channel is published to through Redis, as between processes.
 */
export class LocalReplyChannels {
  readonly #handlers = new Map<string, LocalReplyHandler>();

  /** Delivers the messages for `channel` to `handler` from now on; returns the function that stops it. */
  register(channel: string, handler: LocalReplyHandler): () => void {
    if (this.#handlers.has(channel)) throw new Error(`the reply channel ${channel} is registered already`);
    this.#handlers.set(channel, handler);
    return () => {
      if (this.#handlers.get(channel) === handler) this.#handlers.delete(channel);
    };
  }

  /** The handler of `channel` when an API role of this process listens on it, otherwise undefined (publish it). */
  handlerFor(channel: string): LocalReplyHandler | undefined {
    return this.#handlers.get(channel);
  }
}
