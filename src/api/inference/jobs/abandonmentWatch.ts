import type { DeltaMessage } from "../../../contracts/deltaMessage.ts";
import { isTerminal } from "../../../contracts/deltaMessage.ts";
import type { Logger } from "../../../observability/logger.ts";
import type { CompletionQueues } from "./completionQueues.ts";
import type { CompletionRecord, CompletionRecords } from "./completionRecords.ts";

/**
 * Disconnect is not cancel: when the last client listening to a completion goes away before its end,
 * the completion keeps generating for the grace period, so a client can come back (Last-Event-ID, GET,
 * the same Idempotency-Key). If nobody is listening then, in any API process (the record's listener
 * count), it is stopped: taken off the queue if no worker took it yet (ended with a cancelled message),
 * or aborted by its worker, which charges what was generated. A watch lives in the API process where
 * the last client left; if that process stops (or is killed with its clients), the worker running the
 * job stops it (AbandonedJobWatch: the clients of a process that stopped beating listen no more).
 */
export class AbandonmentWatch {
  readonly #records: CompletionRecords;
  readonly #queues: CompletionQueues;
  readonly #graceMs: number;
  readonly #lastMessage: (completionId: string) => Promise<DeltaMessage | undefined>;
  readonly #logger: Logger;
  readonly #timers = new Map<string, NodeJS.Timeout>();

  constructor(deps: {
    records: CompletionRecords;
    queues: CompletionQueues;
    graceMs: number;
    lastMessage: (completionId: string) => Promise<DeltaMessage | undefined>;
    logger: Logger;
  }) {
    this.#records = deps.records;
    this.#queues = deps.queues;
    this.#graceMs = deps.graceMs;
    this.#lastMessage = deps.lastMessage;
    this.#logger = deps.logger;
  }

  /** A client stopped listening before the completion's end (answers true: for a caller to note it did). */
  detached(record: CompletionRecord): true {
    this.#records.detach(record.completionId).then(
      (left) => {
        // The last client of this process left (others may listen through other processes: the watch counts them when it fires).
        if (left <= 0) this.#schedule(record);
      },
      (error: unknown) => this.#logger.warn("could not count a completion's listeners", { completionId: record.completionId, error: error as Error }),
    );
    return true;
  }

  close(): void {
    for (const timer of this.#timers.values()) clearTimeout(timer);
    this.#timers.clear();
  }

  #schedule(record: CompletionRecord): void {
    clearTimeout(this.#timers.get(record.completionId));
    const timer = setTimeout(() => {
      this.#timers.delete(record.completionId);
      this.#stopIfAbandoned(record).catch((error: unknown) =>
        this.#logger.warn("could not stop an abandoned completion", { completionId: record.completionId, error: error as Error }),
      );
    }, this.#graceMs);
    timer.unref();
    this.#timers.set(record.completionId, timer);
  }

  async #stopIfAbandoned(record: CompletionRecord): Promise<void> {
    if ((await this.#records.listeners(record.completionId)) > 0) return;
    const last = await this.#lastMessage(record.completionId);
    if (last && isTerminal(last)) return;
    this.#logger.info("stopping an abandoned completion", { completionId: record.completionId, model: record.model });
    if (await this.#queues.cancel(record.model, record.completionId, "abandoned")) {
      await this.#records.endUnstarted(record, { seq: 0, type: "error", error: ABANDONED_BEFORE_START });
    }
  }
}

const ABANDONED_BEFORE_START = {
  kind: "cancelled" as const,
  message: "The completion was stopped before it started: no client was listening to it for the grace period.",
  param: null,
};
