import type { CompletionRecord } from "./completionRecords.ts";

/**
 * The records of the completions this API process's clients listen to now (a request's relay, a resume,
 * an attach), each with how many of them listen: what the process writes again when Redis came back
 * empty (a Redis without persistence restarted), so that a running completion stays readable, resumable
 * and cancellable, and its listeners counted, while its job runs on.
 */
export class FollowedRecords {
  readonly #held = new Map<string, { record: CompletionRecord; listeners: number }>();

  /** One more client listens to the record's completion; the function returned (once) says it stopped. */
  hold(record: CompletionRecord): () => void {
    const held = this.#held.get(record.completionId);
    if (held) held.listeners++;
    else this.#held.set(record.completionId, { record, listeners: 1 });
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const now = this.#held.get(record.completionId);
      if (!now) return;
      if (--now.listeners <= 0) this.#held.delete(record.completionId);
    };
  }

  /** Every record held now, with its listeners in this process. */
  all(): { record: CompletionRecord; listeners: number }[] {
    return [...this.#held.values()];
  }
}
