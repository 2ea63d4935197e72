import { createRedis, type Redis, type RedisTimeouts } from "../../src/redis/createRedis.ts";
import type { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";

/** The reason a cancelled job's signal carries. */
export class JobCancelledError extends Error {
  constructor() {
    super("the job was cancelled: its admission was refused");
    this.name = "JobCancelledError";
  }
}

/** A running job's cancellation: its signal aborts when the API cancels it. */
export type TrackedJob = { readonly signal: AbortSignal; readonly cancelled: boolean; done(): void };

/**
 * The worker process's one subscription to InferenceKeys.cancelChannel: the API publishes there the
 * completion id of a job it enqueued speculatively and whose admission was then refused. The running
 * job's signal is aborted; a cancel that arrives before its job started is remembered for a while,
 * so the job is aborted as it starts.
 */
export class JobCancellations {
  readonly ready: Promise<void>;
  readonly #subscriber: Redis;
  readonly #rememberMs: number;
  readonly #running = new Map<string, AbortController>();
  /** completion id -> when the early cancel expires (insertion order = age). */
  readonly #early = new Map<string, number>();

  constructor(redisUrl: string, keys: InferenceKeys, options: { rememberMs?: number; timeouts?: RedisTimeouts } = {}) {
    this.#rememberMs = options.rememberMs ?? 60_000;
    this.#subscriber = createRedis(redisUrl, { kind: "subscriber", ...(options.timeouts ? { timeouts: options.timeouts } : {}) });
    this.#subscriber.on("message", (_channel: string, completionId: string) => this.cancel(completionId));
    this.ready = this.#subscriber.subscribe(keys.cancelChannel()).then(() => undefined);
    this.ready.catch(() => undefined);
  }

  /** Aborts the job if it runs here; otherwise remembers the cancel for when it starts. */
  cancel(completionId: string): void {
    const running = this.#running.get(completionId);
    if (running) {
      running.abort(new JobCancelledError());
      return;
    }
    const now = Date.now();
    for (const [id, expires] of this.#early) {
      if (expires > now) break;
      this.#early.delete(id);
    }
    this.#early.set(completionId, now + this.#rememberMs);
  }

  track(completionId: string): TrackedJob {
    const controller = new AbortController();
    if (this.#early.delete(completionId)) controller.abort(new JobCancelledError());
    else this.#running.set(completionId, controller);
    return {
      signal: controller.signal,
      get cancelled() {
        return controller.signal.aborted;
      },
      done: () => {
        if (this.#running.get(completionId) === controller) this.#running.delete(completionId);
      },
    };
  }

  close(): void {
    this.#subscriber.disconnect();
  }
}
