/**
 * The clients listening to a completion, as its record (InferenceKeys.completionRecord) counts them: one
 * hash field per API process they listen through (`listeners:<its reply channel>`). A count of a
 * process that stopped beating (ApiPresence) is no listener: its clients' connections went with it.
 */
export function listenerField(process: string): string {
  return `${LISTENERS_PREFIX}${process}`;
}

const LISTENERS_PREFIX = "listeners:";
/** The one count of records written before the counts were kept per process: its process is unknown, taken as running. */
const UNKNOWN_PROCESS = "listeners";

export type ListenerCount = {
  /** Clients listening through processes still running. */
  live: number;
  /**
   * When the last process that still counted clients stopped (its beat expired): the moment they left.
   * Null when that is not known: no such process, or a count of a process still running (its clients
   * left at some time it alone knows) or of one no longer in ApiPresence.
   */
  leftAt: number | null;
};

/** `fields`: the record's hash; `expiries`: ApiPresence.expiries(). */
export function countListeners(fields: Record<string, string>, expiries: Map<string, number>, now: number): ListenerCount {
  let live = 0;
  let leftAt: number | null = null;
  let unknown = false;
  for (const [name, value] of Object.entries(fields)) {
    const count = Number(value);
    if (name === UNKNOWN_PROCESS) {
      if (count > 0) live += count;
      continue;
    }
    if (!name.startsWith(LISTENERS_PREFIX)) continue;
    const expiry = expiries.get(name.slice(LISTENERS_PREFIX.length));
    if (expiry !== undefined && expiry > now) {
      if (count > 0) live += count;
      else unknown = true;
    } else if (count > 0) {
      if (expiry === undefined) unknown = true;
      else leftAt = Math.max(leftAt ?? expiry, expiry);
    }
  }
  return { live, leftAt: unknown || live > 0 ? null : leftAt };
}
