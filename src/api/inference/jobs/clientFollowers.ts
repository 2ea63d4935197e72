import { ApiError, ServerShuttingDownError } from "../../http/errors.ts";
import { RelayInterrupts } from "./relayInterrupts.ts";
import type { RunningJob } from "./runningJob.ts";

/** 429 of a client opening more follows of stored completions and responses than an account may hold open at once. */
export class TooManyFollowersError extends ApiError {
  constructor(limit: number) {
    super(
      429,
      "rate_limit_exceeded",
      `Too many open reads of stored completions and responses for this account on this server (at most ${limit}); close some and retry.`,
      {
        code: "too_many_open_streams",
        headers: { "retry-after": "1", "x-should-retry": "true" },
      },
    );
  }
}

/**
 * The follows of stored completions and responses a client opens (a GET of a running completion, a
 * resume, an attach, a stored response's stream), counted per account in this API process. Each holds
 * a Redis connection of its own for up to JOB_IDLE_TIMEOUT_MS and goes through no rate limit of an
 * inference request: without a bound, one account's client could open thousands, take Redis's
 * connections and this process's file descriptors from every other account.
 */
export class ClientFollowers {
  readonly #perAccount: number;
  readonly #open = new Map<string, number>();
  /** Each open follow's interruption (interruptAll). */
  readonly #interrupts = new RelayInterrupts();

  constructor(perAccount: number) {
    this.#perAccount = perAccount;
  }

  /** Follows the account has open in this process. */
  open(accountId: string): number {
    return this.#open.get(accountId) ?? 0;
  }

  /**
   * Ends every open follow now, and any taken later at once (the process's shutdown grace is nearly
   * over): each next() throws ServerShuttingDownError; the job runs on, for its client to resume
   * elsewhere. Returns how many were open.
   */
  interruptAll(): number {
    return this.#interrupts.interruptAll();
  }

  /** `start()`'s job, counted for the account until it is released; 429 when the account holds the most already. */
  take<T extends RunningJob>(accountId: string, start: () => T): RunningJob {
    const open = this.open(accountId);
    if (open >= this.#perAccount) throw new TooManyFollowersError(this.#perAccount);
    const job = start();
    this.#open.set(accountId, open + 1);
    let released = false;
    let interrupted: ServerShuttingDownError | null = null;
    const interrupt = (): void => {
      interrupted = new ServerShuttingDownError(true);
      job.release();
    };
    const forget = this.#interrupts.addRelay(interrupt);
    if (this.#interrupts.interrupting) interrupt();
    return {
      completionId: job.completionId,
      next: () =>
        job.next().catch((error: unknown) => {
          throw interrupted ?? error;
        }),
      release: () => {
        job.release();
        forget();
        if (released) return;
        released = true;
        const left = this.open(accountId) - 1;
        if (left > 0) this.#open.set(accountId, left);
        else this.#open.delete(accountId);
      },
    };
  }
}
