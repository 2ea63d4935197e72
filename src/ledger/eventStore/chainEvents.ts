import { eventHash } from "./eventHash.ts";
import type { NewEvent } from "./types.ts";

/** One event as it is written: data and metadata as JSON text, its stream version and chained hashes. */
export type ChainedEvent = {
  streamVersion: number;
  eventId: string;
  type: string;
  schemaVersion: number;
  data: string;
  metadata: string;
  prevHash: string | null;
  hash: string;
};

/**
 * The rows of `events` appended to `streamId` after version `fromVersion`, whose head hash is
 * `prevHash` (null for a new stream): versions fromVersion + 1, + 2, ..., each event's hash (eventHash)
 * chained to the one before, all recorded at `recordedAt` (what the database stores and returns: an
 * ISO 8601 UTC time with milliseconds), so the hash covers the time without reading the row back.
 * The last event's hash is the stream's new head.
 */
export function chainEvents(
  streamId: string,
  fromVersion: number,
  prevHash: string | null,
  events: (NewEvent & { eventId: string })[],
  recordedAt: string,
): ChainedEvent[] {
  let previous = prevHash;
  return events.map((event, i) => {
    const streamVersion = fromVersion + i + 1;
    const schemaVersion = event.schemaVersion ?? 1;
    const data = JSON.stringify(event.data);
    const metadata = JSON.stringify(event.metadata ?? {});
    const hash = eventHash({
      prevHash: previous,
      streamId,
      streamVersion,
      eventId: event.eventId,
      type: event.type,
      schemaVersion,
      // Hashed as they will read back: the JSON text parsed again (undefined members dropped, dates as strings).
      data: JSON.parse(data),
      metadata: JSON.parse(metadata),
      recordedAt,
    });
    const row: ChainedEvent = { streamVersion, eventId: event.eventId, type: event.type, schemaVersion, data, metadata, prevHash: previous, hash };
    previous = hash;
    return row;
  });
}
