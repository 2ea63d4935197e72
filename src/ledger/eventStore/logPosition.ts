/**
 * A position in the global log: events are ordered by (transactionId, globalPosition), both compared as
 * numbers. They are carried as decimal strings (an xid8 and a bigint do not fit a JavaScript number) and
 * must never be compared or sorted as strings: "10000" < "9999".
 */
export type LogPosition = { transactionId: string; globalPosition: string };

export const LOG_START: LogPosition = { transactionId: "0", globalPosition: "0" };

/** Negative when `a` comes before `b` in the log, 0 when equal, positive after (numeric order). */
export function compareLogPositions(a: LogPosition, b: LogPosition): number {
  const byTransaction = compareDecimal(a.transactionId, b.transactionId);
  return byTransaction !== 0 ? byTransaction : compareDecimal(a.globalPosition, b.globalPosition);
}

function compareDecimal(a: string, b: string): number {
  const x = BigInt(a);
  const y = BigInt(b);
  return x < y ? -1 : x > y ? 1 : 0;
}

export function positionOf(event: LogPosition): LogPosition {
  return { transactionId: event.transactionId, globalPosition: event.globalPosition };
}
