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
  if (error.name === "MaxRetriesPerRequestError" || error.name === "ConnectionClosedError" || error.name === "ClusterAllFailedError") return true;
  // redis-errors' AbortError ("Command aborted due to connection close") carries the aborted command.
  if (error.name === "AbortError" && "command" in error) return true;
  // A cluster client gives up on a command after following MOVED/ASK or failover retries this often.
  if (error.message.startsWith("Too many Cluster redirections.")) return true;
  return IOREDIS_CONNECTION_MESSAGES.has(error.message);
}

const IOREDIS_CONNECTION_MESSAGES = new Set([
  "Stream isn't writeable and enableOfflineQueue options is false",
  "Command timed out",
  "Connection is closed.",
  // ioredis's Cluster client, while the cluster is away.
  "Cluster isn't ready and enableOfflineQueue options is false",
  "None of startup nodes is available",
  "Cluster is disconnected.",
]);
