/**
 * Whether an error means Redis cannot be reached or did not answer in time: the caller should answer
 * "try again shortly" (503), not "internal error" (500). Redis's own error replies (ReplyError: a
 * wrong type, a script error) are not outages.
 *
 * ioredis raises these as MaxRetriesPerRequestError (a command in flight when the connection dropped)
 * or as plain Errors without a code (no connection, command timeout, connection closed), so those are
 * recognised by their fixed messages (ioredis's and BullMQ's, listed below), never by free text.
 */
export function isRedisUnavailable(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  if (error.name === "MaxRetriesPerRequestError" || error.name === "ConnectionClosedError") return true;
  // redis-errors' AbortError ("Command aborted due to connection close") carries the aborted command.
  if (error.name === "AbortError" && "command" in error) return true;
  return IOREDIS_CONNECTION_MESSAGES.has(error.message);
}

const IOREDIS_CONNECTION_MESSAGES = new Set(["Stream isn't writeable and enableOfflineQueue options is false", "Command timed out", "Connection is closed."]);
