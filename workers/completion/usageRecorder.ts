import type { Pool } from "../../src/db/createPool.ts";
import { readStream } from "../../src/ledger/eventStore/readStream.ts";
import type { EventMetadata } from "../../src/ledger/eventStore/types.ts";
import { completionStreamId, UsageRecordedDataSchema, type UsageRecorded, type UsageRecordedData } from "../../src/ledger/usageRecordedEvent.ts";
import type { SettleResult } from "../../src/ledger/budget/recordUsage.ts";
import { SettledHoldFolds } from "../../src/ledger/budget/settledHoldFolds.ts";
import { UsageGroupCommit } from "../../src/ledger/budget/usageGroupCommit.ts";
import { isDatabaseUnavailable } from "../../src/db/databaseUnavailable.ts";
import { placeHold } from "../../src/ledger/budget/placeHold.ts";

/**
 * How long a finished job's client waits for the usage to be recorded (PostgreSQL unreachable) before
 * its stream ends anyway, with the usage being recorded: under the API's SSE keep-alive-bounded waits,
 * and long enough to ride out a failover. The worker role passes the configuration's (USAGE_WAIT_MS).
 */
export const USAGE_WAIT_MS = 10_000;

export type RecordOutcome = "recorded" | "already_recorded" | "refused";

export type RecordOptions = {
  /**
   * The job was admitted speculatively (queued while its hold was being placed). Its usage is recorded
   * once the hold is there and never when the admission was refused. Until `admissionDecidedBy` neither
   * may be there yet (the hold statement is still on its way): the recorder waits. After it, neither being
   * there means the API process that admitted it died before its hold statement (or the hold was lost):
   * the recorder completes the admission itself, placing a hold of the usage's cost with the same
   * conditional statement (placeHold). Placed, the usage is charged as any; refused (the budget has no
   * room for it, or the subscription ended), the refusal is recorded and nothing is charged: a job that
   * was never admitted never takes an account past its budget.
   */
  speculative?: boolean;
  admissionDecidedBy?: Date;
  /**
   * Whether the API has refused the admission since (the job's cancel said so: its client was answered
   * with an error, and the refusal may not be recorded in PostgreSQL yet, e.g. while the API cannot
   * reach it): from then on nothing is recorded. Asked before each attempt; an attempt already made
   * stands (one that failed may have recorded the usage all the same: it is then found).
   */
  refused?: () => boolean;
};

/**
 * The hold of a speculatively admitted job whose own hold never came, placed by its worker: the usage's
 * cost, in the billing period it is charged to, with admission's conditional statement (a refusal is
 * recorded as the API's would be). True when placed. A hold placed meanwhile by the API (the same id)
 * makes the statement fail on its key: the next attempt then finds the hold.
 */
async function placeLateHold(pool: Pool, data: UsageRecordedData): Promise<boolean> {
  const placed = await placeHold(pool, {
    holdId: data.completionId,
    accountId: data.accountId,
    amountMicroChf: data.costMicroChf,
    now: new Date(data.finishedAt),
    speculative: true,
  });
  return placed.ok;
}

/**
 * A speculatively admitted job's hold statement was sent before the job was queued; when its settle
 * still finds neither the hold nor a refusal this long after the job started, its API process died
 * before placing it (or it was lost), and the worker completes the admission itself (RecordOptions).
 */
export const ADMISSION_DECIDED_WITHIN_MS = 30_000;

/** #retrying gave up: `stop` said so. */
const STOPPED = Symbol("stopped");

/**
 * Records a finished job's usage and settles its budget hold (the one way usage is charged): recordUsage appends
 * UsageRecorded to `completion-<id>` with expected version "no_stream" (the stream exists only once, so a
 * job that runs again, retried or stalled, can never record, and so charge, twice) and marks the
 * request's hold settled in one durable transaction, shared with the usages of other jobs that finish at
 * the same time (UsageGroupCommit); then the hold is folded into the budget (released, the actual cost
 * charged) by one statement shared with the folds of that moment (SettledHoldFolds). A retry is safe: it
 * finds the stream, records nothing again and only completes a fold that did not happen. PostgreSQL unreachable or silent (a lost connection, a refused or timed-out connect, a
 * query timeout: isDatabaseUnavailable) is retried until it answers, however long the outage: the usage
 * of delivered tokens must be recorded, and the job that waits for it stays active (if its worker dies,
 * the job is handed to another, which records it; see resumption.ts). Any other error is retried
 * `retries` times, then thrown.
 */
export class UsageRecorder {
  readonly #pool: Pool;
  readonly #commits: UsageGroupCommit;
  readonly #folds: SettledHoldFolds;
  readonly #retries: number;
  readonly #now: () => Date;
  readonly #maxPauseMs: number;
  readonly #onRetry: (error: unknown, attempt: number) => void;

  /** `foldPool`: connections with synchronous_commit off, for the budget half of the settle (SettledHoldFolds). */
  constructor(
    pool: Pool,
    options: {
      retries?: number;
      foldPool?: Pool;
      now?: () => Date;
      /** The longest pause between two attempts while PostgreSQL is unreachable (default 1 s). */
      maxPauseMs?: number;
      /** Told of each failed attempt that is retried, numbered from 0 (for a log line). */
      onRetry?: (error: unknown, attempt: number) => void;
    } = {},
  ) {
    this.#pool = pool;
    this.#commits = new UsageGroupCommit(pool);
    this.#folds = new SettledHoldFolds(options.foldPool ?? pool);
    this.#retries = options.retries ?? 3;
    this.#now = options.now ?? (() => new Date());
    this.#maxPauseMs = options.maxPauseMs ?? 1000;
    this.#onRetry = options.onRetry ?? (() => undefined);
  }

  async record(data: UsageRecordedData, metadata: EventMetadata, options: RecordOptions = {}): Promise<RecordOutcome> {
    const event: UsageRecorded = { type: "UsageRecorded", data: UsageRecordedDataSchema.parse(data) };
    const refused = options.refused ?? (() => false);
    let pause = 5;
    for (;;) {
      // Every attempt so far answered (nothing recorded, the admission pending): nothing to undo.
      if (refused()) return "refused";
      const speculative = options.speculative === true;
      const result = await this.#settle(event, metadata, speculative, refused);
      if (result === STOPPED) return this.#afterRefusal(event.data.completionId);
      if (result.admission === "refused") return "refused";
      if (result.admission === "admitted") return result.recorded ? "recorded" : "already_recorded";
      const decided = options.admissionDecidedBy !== undefined && this.#now() >= options.admissionDecidedBy;
      if (speculative && decided) {
        // Neither the hold nor a refusal by now: the admission is completed here (see RecordOptions).
        const placed = await this.#retrying(() => placeLateHold(this.#pool, event.data), refused);
        if (placed === STOPPED) return this.#afterRefusal(event.data.completionId);
        if (!placed) return "refused";
        continue;
      }
      await new Promise((resolve) => setTimeout(resolve, pause));
      pause = Math.min(pause * 2, 250);
    }
  }

  /** The usage recorded for a completion, or null when none is (a job run again checks it first). */
  async recorded(completionId: string): Promise<UsageRecordedData | null> {
    const { events } = await this.#retrying(() => readStream(this.#pool, completionStreamId(completionId)));
    const event = events.find((e) => e.type === "UsageRecorded");
    return event ? UsageRecordedDataSchema.parse(event.data) : null;
  }

  async #settle(event: UsageRecorded, metadata: EventMetadata, requireAdmission: boolean, stop: () => boolean): Promise<SettleResult | typeof STOPPED> {
    return this.#retrying(async () => {
      const recorded = await this.#commits.record(event, metadata, { requireAdmission });
      if (recorded.admission === "admitted") await this.#folds.fold(event.data.completionId);
      return recorded;
    }, stop);
  }

  /**
   * The admission was refused (RecordOptions.refused) while an attempt to record had failed: that
   * attempt may have recorded the usage all the same (its commit went through unseen). If it did, the
   * usage stands (recorded once) and its hold is folded; otherwise nothing is recorded.
   */
  async #afterRefusal(completionId: string): Promise<RecordOutcome> {
    if ((await this.recorded(completionId)) === null) return "refused";
    await this.#retrying(() => this.#folds.fold(completionId));
    return "already_recorded";
  }

  /**
   * `work`, again while PostgreSQL is unreachable, and at most `retries` more times for other errors;
   * STOPPED when `stop` says so before an attempt after the first.
   */
  async #retrying<T>(work: () => Promise<T>): Promise<T>;
  async #retrying<T>(work: () => Promise<T>, stop: () => boolean): Promise<T | typeof STOPPED>;
  async #retrying<T>(work: () => Promise<T>, stop: () => boolean = () => false): Promise<T | typeof STOPPED> {
    let failures = 0;
    for (let attempt = 0; ; attempt++) {
      try {
        return await work();
      } catch (error) {
        if (!isDatabaseUnavailable(error) && ++failures > this.#retries) throw error;
        this.#onRetry(error, attempt);
        await new Promise((resolve) => setTimeout(resolve, Math.min(this.#maxPauseMs, 50 * 2 ** Math.min(attempt, 10))));
        if (stop()) return STOPPED;
      }
    }
  }
}
