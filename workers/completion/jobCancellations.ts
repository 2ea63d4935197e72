import type { JobError } from "../../src/contracts/deltaMessage.ts";
import { type CancelReason, decodeCancelMessage } from "../../src/contracts/cancelMessage.ts";
import type { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import { createRedis, type Redis, type RedisTimeouts } from "../../src/redis/createRedis.ts";
import { within } from "./settledWithin.ts";
import type { RedisTarget } from "../../src/redis/redisTarget.ts";

/** A cancel as the worker heard it: why, and (for a request the API ended early) what its client was sent. */
export type Cancel = { reason: CancelReason; deliveredThroughSeq: number | null };

/** The reason a cancelled job's signal carries. */
export class JobCancelledError extends Error {
  readonly reason: CancelReason;
  /** The last message number the client was sent (CancelMessage), or null when the cancel did not say. */
  readonly deliveredThroughSeq: number | null;
  constructor(reason: CancelReason, deliveredThroughSeq: number | null = null) {
    super(reason === "refused" ? "the job was cancelled: its admission was refused" : `the job was cancelled (${reason})`);
    this.name = "JobCancelledError";
    this.reason = reason;
    this.deliveredThroughSeq = deliveredThroughSeq;
  }
}

/**
 * A running job's cancellation: its signal aborts when the API cancels it; `reason` says why (null: not
 * cancelled), `deliveredThroughSeq` what its client was sent when the API said (null otherwise).
 */
export type TrackedJob = {
  readonly signal: AbortSignal;
  readonly cancelled: boolean;
  readonly reason: CancelReason | null;
  readonly deliveredThroughSeq: number | null;
  /**
   * Resolves at once when the subscription was up all along since the job was tracked. Otherwise (a
   * cancel may have been published while it was away): once it is back, waits `graceMs` for the API to
   * tell what its client got (it decides once its own connection is back), then reads the job's cancel
   * mark; a cancel found aborts the signal. Bounded: gives up after RESUBSCRIBE_WAIT_MS without the
   * subscription, and after COMMAND_WAIT_MS without an answer.
   */
  caughtUp(): Promise<void>;
  /**
   * Reads the job's cancel mark now (bounded by COMMAND_WAIT_MS); a cancel found aborts the signal. For a
   * job run again after its worker died: a cancel published while no worker ran it reached nobody.
   */
  checkMark(): Promise<void>;
  done(): void;
};

/** How long a job whose worker lost its subscription waits for it to come back before charging anyway. */
const RESUBSCRIBE_WAIT_MS = 10_000;
/** How long each of the catch-up's commands may go unanswered. */
const COMMAND_WAIT_MS = 2_000;
/**
 * After a loss of the subscription, how long a finished job waits for a cancel before it is charged: the
 * API, its own connection back, finds what its client missed (CompletionFeed) within about this long.
 */
const VERDICT_GRACE_MS = 1_500;

/**
 * The worker process's one subscription to InferenceKeys.cancelChannel: the API publishes there the
 * completion id and reason of a job to stop (a refused speculative admission, the owner's cancel, work
 * nobody came back for). The running job's signal is aborted; a cancel that arrives before its job
 * started is remembered for a while, so the job is aborted as it starts.
 */
export class JobCancellations {
  readonly ready: Promise<void>;
  readonly #subscriber: Redis;
  /** Reads cancel marks (a subscribed connection cannot); none: marks are not read. */
  readonly #commands: Redis | null;
  readonly #keys: InferenceKeys;
  readonly #graceMs: number;
  /** How many times the subscription was (re)established. */
  #subscriptions = 0;
  readonly #rememberMs: number;
  readonly #running = new Map<string, AbortController>();
  /** completion id -> the early cancel and when it expires (insertion order = age). */
  readonly #early = new Map<string, Cancel & { expires: number }>();

  /** `commands`: a connection to read cancel marks with (see TrackedJob.caughtUp). */
  constructor(
    redis: RedisTarget | string,
    keys: InferenceKeys,
    options: { rememberMs?: number; timeouts?: RedisTimeouts; commands?: Redis; graceMs?: number } = {},
  ) {
    this.#rememberMs = options.rememberMs ?? 60_000;
    this.#commands = options.commands ?? null;
    this.#keys = keys;
    this.#graceMs = options.graceMs ?? VERDICT_GRACE_MS;
    this.#subscriber = createRedis(redis, { kind: "subscriber", ...(options.timeouts ? { timeouts: options.timeouts } : {}) });
    this.#subscriber.on("ready", () => {
      this.#subscriptions++;
    });
    this.#subscriber.on("message", (_channel: string, text: string) => {
      const message = decodeCancelMessage(text);
      if (message) this.cancel(message.completionId, message.reason, message.deliveredThroughSeq ?? null);
    });
    this.ready = this.#subscriber.subscribe(keys.cancelChannel()).then(() => undefined);
    this.ready.catch(() => undefined);
  }

  /** Aborts the job if it runs here; otherwise remembers the cancel for when it starts. */
  cancel(completionId: string, reason: CancelReason = "refused", deliveredThroughSeq: number | null = null): void {
    const running = this.#running.get(completionId);
    if (running) {
      if (!running.signal.aborted) running.abort(new JobCancelledError(reason, deliveredThroughSeq));
      return;
    }
    const now = Date.now();
    for (const [id, early] of this.#early) {
      if (early.expires > now) break;
      this.#early.delete(id);
    }
    this.#early.set(completionId, { reason, deliveredThroughSeq, expires: now + this.#rememberMs });
  }

  track(completionId: string): TrackedJob {
    const controller = new AbortController();
    const subscribedAt = this.#subscribed() ? this.#subscriptions : -1;
    const early = this.#early.get(completionId);
    if (early) {
      this.#early.delete(completionId);
      controller.abort(new JobCancelledError(early.reason, early.deliveredThroughSeq));
    } else this.#running.set(completionId, controller);
    return {
      signal: controller.signal,
      get cancelled() {
        return controller.signal.aborted;
      },
      get reason() {
        return controller.signal.aborted ? (controller.signal.reason as JobCancelledError).reason : null;
      },
      get deliveredThroughSeq() {
        return controller.signal.aborted ? (controller.signal.reason as JobCancelledError).deliveredThroughSeq : null;
      },
      caughtUp: () =>
        subscribedAt >= 0 && this.#subscribed() && this.#subscriptions === subscribedAt ? Promise.resolve() : this.#catchUp(completionId, controller),
      checkMark: () => this.#readMark(completionId, controller),
      done: () => {
        if (this.#running.get(completionId) === controller) this.#running.delete(completionId);
      },
    };
  }

  /** Whether the subscription is up now. */
  get subscribed(): boolean {
    return this.#subscribed();
  }

  #subscribed(): boolean {
    return this.#subscriber.status === "ready";
  }

  async #catchUp(completionId: string, controller: AbortController): Promise<void> {
    if (this.#commands === null || controller.signal.aborted) return;
    const giveUpAt = Date.now() + RESUBSCRIBE_WAIT_MS;
    try {
      while (!this.#subscribed() && Date.now() < giveUpAt) await sleep(100);
      if (!this.#subscribed()) return;
      // Answered once the connection has taken its subscribe again (a PING is allowed while subscribed).
      // Each command is bounded: a silent Redis must not hold the job's charge (nor its slot) for ever.
      if ((await within(this.#subscriber.ping(), COMMAND_WAIT_MS)).kind !== "resolved") return;
      await sleep(this.#graceMs);
      await this.#readMark(completionId, controller);
    } catch {
      // Redis away again: the job is charged as it ended.
    }
  }

  async #readMark(completionId: string, controller: AbortController): Promise<void> {
    if (this.#commands === null || controller.signal.aborted) return;
    const read = await within(this.#commands.get(this.#keys.cancelMark(completionId)), COMMAND_WAIT_MS);
    const mark = read.kind === "resolved" ? read.value : null;
    const message = mark === null ? null : decodeCancelMessage(mark);
    if (message && !controller.signal.aborted) controller.abort(new JobCancelledError(message.reason, message.deliveredThroughSeq ?? null));
  }

  close(): void {
    this.#subscriber.disconnect();
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * A cancelled job's error, by the cancel's reason; `abandoned` (code) says it was the platform's doing
 * (nobody listening, or the job silent), not its owner's.
 */
export function cancelledError(reason: keyof typeof CANCELLED_MESSAGE): JobError {
  return { kind: "cancelled", message: CANCELLED_MESSAGE[reason], param: null, ...(reason === "abandoned" || reason === "lost" ? { code: reason } : {}) };
}

/** What a cancelled job's stream says, by the cancel's reason. */
export const CANCELLED_MESSAGE = {
  user: "The completion was cancelled by its owner.",
  abandoned:
    "The completion was stopped: no client was listening to it for the grace period (its connection closed, or the API process it came through stopped or stopped answering), or it made no progress for the idle timeout.",
  lost: "The completion was stopped: its request ended before the reply could reach the client.",
  expired: "The request was stopped before it finished: its batch expired or was cancelled. Nothing was charged for it.",
  refused: "The request was refused (a rate limit or the budget) before it was answered. Nothing was charged for it.",
} as const;
