import type pg from "pg";

/** Anything that can run a query: a pool or a client inside a transaction. */
export type Queryable = Pick<pg.PoolClient, "query">;

export type EventMetadata = {
  correlationId?: string;
  causationId?: string;
  /** Who caused it: `account:<id>`, `admin:cli` or `admin:http` (an operator, by the CLI or the admin API), `worker`, ... never a secret. */
  actor?: string;
  traceparent?: string;
};

/** A domain event as the domain code sees it: plain data. */
export type DomainEvent<Type extends string = string, Data extends Record<string, unknown> = Record<string, unknown>> = {
  type: Type;
  data: Data;
};

/** An event about to be appended. eventId makes re-appends idempotent. */
export type NewEvent = DomainEvent & { eventId?: string; metadata?: EventMetadata; schemaVersion?: number };

export type RecordedEvent = {
  eventId: string;
  streamId: string;
  streamVersion: number;
  /** bigint as string: JavaScript numbers cannot hold every bigint. */
  globalPosition: string;
  /** xid8 as string. */
  transactionId: string;
  type: string;
  schemaVersion: number;
  data: Record<string, unknown>;
  metadata: EventMetadata;
  recordedAt: Date;
};

/**
 * The version a command expects the stream to be at: a number (0 = the stream has no events yet),
 * "no_stream" (it must not exist, same as 0) or "any".
 */
export type ExpectedVersion = number | "no_stream" | "any";

export type AppendResult = {
  /** The stream's version after the append. */
  nextVersion: number;
  /** False when every event was already in the store (idempotent re-append). */
  appended: boolean;
};
