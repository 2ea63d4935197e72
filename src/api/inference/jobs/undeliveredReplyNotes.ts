import type { Pool } from "../../../db/createPool.ts";
import { isDatabaseUnavailable } from "../../../db/databaseUnavailable.ts";
import { noteUndelivered } from "../../../ledger/budget/undeliveredReplies.ts";
import type { Logger } from "../../../observability/logger.ts";

/**
 * Notes a reply the API gave up on for the platform's reason, with what its client was sent (-1:
 * nothing; else its completion tokens), so that a charge recorded before the worker heard of it is
 * refunded down to that (undelivered_replies, settled by the projector's sweeper). Never throws.
 */
export type UndeliveredNotes = { note(completionId: string, deliveredCompletionTokens: number): void };

/** How long a note is tried again while PostgreSQL does not answer, and how often. */
const NOTE_RETRY = { forMs: 60_000, intervalMs: 1_000 } as const;

/**
 * The API's UndeliveredNotes: each note is written to `undelivered_replies` in the background, tried again
 * while PostgreSQL is unreachable for a minute; one that cannot be written is logged (its charge may then
 * exceed what its client was sent).
 */
export class UndeliveredReplyNotes implements UndeliveredNotes {
  readonly #pool: Pool;
  readonly #logger: Logger;

  constructor(pool: Pool, logger: Logger) {
    this.#pool = pool;
    this.#logger = logger;
  }

  note(completionId: string, deliveredCompletionTokens: number): void {
    void this.#write(completionId, deliveredCompletionTokens);
  }

  async #write(completionId: string, delivered: number): Promise<void> {
    const giveUpAt = Date.now() + NOTE_RETRY.forMs;
    for (;;) {
      try {
        await noteUndelivered(this.#pool, completionId, delivered);
        return;
      } catch (error) {
        if (!isDatabaseUnavailable(error) || Date.now() >= giveUpAt) {
          this.#logger.warn("could not note a reply given up on: its charge is not checked against what its client was sent", {
            completionId,
            error: error as Error,
          });
          return;
        }
        await new Promise((resolve) => setTimeout(resolve, NOTE_RETRY.intervalMs));
      }
    }
  }
}
