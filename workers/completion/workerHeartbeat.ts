import type { WorkerPresence } from "../../src/contracts/workerPresence.ts";
import type { Logger } from "../../src/observability/logger.ts";
import { within } from "./settledWithin.ts";

/**
 * How long stop() waits for the leave to reach Redis. Its commands wait for Redis while it is away (a
 * worker's connection), and a worker that could not leave drops out anyway when its last beat expires.
 */
const LEAVE_WITHIN_MS = 1_000;

/**
 * Announces the models a worker serves: a beat per model every `intervalMs`, each valid for three
 * intervals, so a worker that dies drops out of GET /v1/models within that time. stop() leaves at once.
 */
export class WorkerHeartbeat {
  readonly #presence: WorkerPresence;
  readonly #workerId: string;
  readonly #modelIds: string[];
  readonly #intervalMs: number;
  readonly #logger: Logger;
  #timer: NodeJS.Timeout | null = null;

  constructor(options: { presence: WorkerPresence; workerId: string; modelIds: string[]; intervalMs: number; logger: Logger }) {
    this.#presence = options.presence;
    this.#workerId = options.workerId;
    this.#modelIds = options.modelIds;
    this.#intervalMs = options.intervalMs;
    this.#logger = options.logger;
  }

  /** Beats once (so the models are live when this resolves), then keeps beating. */
  async start(): Promise<void> {
    await this.#beat();
    this.#timer = setInterval(() => {
      this.#beat().catch((error: unknown) => this.#logger.warn("heartbeat failed", { error: error as Error }));
    }, this.#intervalMs);
    this.#timer.unref();
  }

  /** Stops beating and leaves: at once while Redis answers, else within LEAVE_WITHIN_MS (the beats then expire). */
  async stop(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    await within(Promise.all(this.#modelIds.map((id) => this.#presence.leave(id, this.#workerId))), LEAVE_WITHIN_MS);
  }

  async #beat(): Promise<void> {
    await Promise.all(this.#modelIds.map((id) => this.#presence.beat(id, this.#workerId, this.#intervalMs * 3)));
  }
}
