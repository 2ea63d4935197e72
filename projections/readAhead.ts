import { positionOf, type LogPosition } from "../src/ledger/eventStore/logPosition.ts";
import type { RecordedEvent } from "../src/ledger/eventStore/types.ts";

/**
 * Yields the log in batches from `read` (readAll or readAllInSnapshot on a connection of its own),
 * starting after `from`, with the next batch read while the caller works on the current one: the
 * database reads while this process applies, and at most two batches are in memory (the one yielded and
 * the one being read). `rereadEmpty`: an empty batch read ahead is read once more before the end is
 * taken as reached (readAll's in-flight bound counts the caller's own open transaction, so a batch read
 * while the caller's transaction was open may stop short of what is readable once it has committed).
 */
export async function* readAhead(
  read: (after: LogPosition) => Promise<RecordedEvent[]>,
  from: LogPosition,
  options: { rereadEmpty: boolean },
): AsyncGenerator<RecordedEvent[], void, undefined> {
  let after = from;
  let next = read(after);
  try {
    for (;;) {
      let events = await next;
      if (events.length === 0 && options.rereadEmpty) events = await read(after);
      if (events.length === 0) return;
      after = positionOf(events.at(-1)!);
      next = read(after);
      next.catch(() => undefined); // awaited on the next turn (or below); this only keeps a failure from going unhandled meanwhile
      yield events;
    }
  } finally {
    // A caller that stops early (or fails) must not hand back a connection with a read still running on it.
    await next.catch(() => undefined);
  }
}
