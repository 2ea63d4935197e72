import pg from "pg";

/**
 * Whether an error means PostgreSQL cannot be reached or did not answer in time (as opposed to a
 * statement that failed on its own account, e.g. a constraint violation): the caller should answer
 * "try again shortly" (503), not "internal error" (500).
 *
 * Classified by SQLSTATE for the server's errors and by the system error code for socket errors. pg
 * and pg-pool raise their own connection and timeout failures as plain Errors without a code, so those
 * few are recognised by their fixed messages (the library's, listed below), never by free text.
 */
export function isDatabaseUnavailable(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  if (error instanceof pg.DatabaseError) return unavailableSqlState(error.code ?? "");
  const code = (error as { code?: unknown }).code;
  if (typeof code === "string" && SOCKET_ERROR_CODES.has(code)) return true;
  if (PG_CONNECTION_MESSAGES.has(error.message)) return true;
  // pg-pool wraps the client's connect failure ("Connection terminated due to connection timeout", cause: the socket's).
  return error.cause !== undefined && error.cause !== error && isDatabaseUnavailable(error.cause);
}

/**
 * 08: connection exception; 53: insufficient resources (too many connections, out of memory or disk);
 * 57014: query_canceled (statement_timeout); 57P01-57P05: the server shuts down, crashed, is starting,
 * or ended an idle session; 25P03: idle_in_transaction_session_timeout ended the session.
 */
function unavailableSqlState(code: string): boolean {
  return code.startsWith("08") || code.startsWith("53") || code === "57014" || code.startsWith("57P") || code === "25P03";
}

/** Socket failures of a connection (Node's system error codes). */
const SOCKET_ERROR_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EPIPE",
  "ENOTFOUND",
  "EAI_AGAIN",
  "ECONNABORTED",
]);

/** The errors pg (client.js) and pg-pool raise without a code for a lost, refused or silent connection. */
const PG_CONNECTION_MESSAGES = new Set([
  "timeout exceeded when trying to connect",
  "Connection terminated due to connection timeout",
  "Connection terminated unexpectedly",
  "Connection terminated",
  "Query read timeout",
  "timeout expired",
  "Client has encountered a connection error and is not queryable",
]);
