/**
 * start() with `keepQueued`: the job is still in line, no worker started it yet (or this process stops
 * listening). Its budget hold stays for its settle; its messages are read from its replay stream.
 */
export class StillQueuedError extends Error {
  constructor() {
    super("the job is still queued");
    this.name = "StillQueuedError";
  }
}
