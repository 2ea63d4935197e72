import type { Pool, PoolClient } from "../../db/createPool.ts";
import { withTransaction } from "../../db/withTransaction.ts";
import { appendToStream } from "./appendToStream.ts";
import { ConcurrencyError } from "./concurrencyError.ts";
import { readStream } from "./readStream.ts";
import type { DomainEvent, EventMetadata, RecordedEvent } from "./types.ts";

/** Pure domain logic of one stream type (Emmett's decider). */
export type Decider<State, Command, Event extends DomainEvent> = {
  initialState: () => State;
  evolve: (state: State, event: Event) => State;
  /** Returns the events the command causes; throws a domain error to refuse it; [] changes nothing. */
  decide: (command: Command, state: State) => Event[];
  /** Parses an event read back from the store (zod at the boundary). */
  parseEvent: (event: RecordedEvent) => Event;
};

export type HandleCommandOptions<State, Event extends DomainEvent> = {
  streamId: string;
  streamType: string;
  metadata?: EventMetadata;
  /** Inline projection: runs in the same transaction as the append (e.g. rm_keys). */
  afterAppend?: (client: PoolClient, events: Event[], state: State) => Promise<void>;
  /** Retries after a version conflict before giving up with ConcurrencyError. */
  retries?: number;
};

export type HandleCommandResult<State, Event> = { state: State; events: Event[]; version: number };

/**
 * Reads the stream (locking its row, so commands on one stream queue up rather than conflict),
 * folds it, decides, appends with the expected version and runs the inline projection, all in one
 * transaction. A version conflict (only possible when the stream is created concurrently, or by a
 * writer that does not lock) retries the whole command, up to `retries` times.
 */
export async function handleCommand<State, Command, Event extends DomainEvent>(
  pool: Pool,
  decider: Decider<State, Command, Event>,
  command: Command,
  options: HandleCommandOptions<State, Event>,
): Promise<HandleCommandResult<State, Event>> {
  const retries = options.retries ?? 3;
  for (let attempt = 0; ; attempt++) {
    try {
      return await withTransaction(pool, async (client) => {
        const stream = await readStream(client, options.streamId, { lock: true });
        const state = stream.events.map(decider.parseEvent).reduce(decider.evolve, decider.initialState());
        const events = decider.decide(command, state);
        if (events.length === 0) return { state, events, version: stream.version };
        const { nextVersion } = await appendToStream(
          client,
          options.streamId,
          options.streamType,
          events.map((e) => ({ ...e, metadata: options.metadata })),
          stream.version,
        );
        const next = events.reduce(decider.evolve, state);
        if (options.afterAppend) await options.afterAppend(client, events, next);
        return { state: next, events, version: nextVersion };
      });
    } catch (error) {
      if (error instanceof ConcurrencyError && attempt < retries) continue;
      throw error;
    }
  }
}
